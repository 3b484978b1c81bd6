"""Produce/consume round trips with real clients: confluent-kafka, kafka-python, aiokafka, kcat.

Consumers use assign() with explicit offsets only (no consumer groups).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncio
import shutil
import subprocess
import threading
from collections import defaultdict
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AIOTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KPTopicPartition

from .helpers import (
    OP_TIMEOUT_S,
    Got,
    assert_delivered,
    consume_confluent,
    create_topic,
    produce_all,
    producer,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
KCAT = shutil.which("kcat")

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]

if TYPE_CHECKING:
    from conftest import Broker


def dataset(n_plain: int = 100) -> list[Record]:
    special: list[Record] = [
        (b"k1", b"v1", []),
        (None, b"null key", []),
        (b"tombstone", None, []),
        (b"empty-value", b"", []),
        (b"", b"empty key", []),
        (b"hdr", b"headers", [("h1", b"a"), ("h1", b"b"), ("h2", b""), ("\u00e9t\u00e9", b"x")]),
        (b"\x00\xff\x01bin", bytes(range(256)) * 4, [("bin", b"\x00\xff\x80")]),
    ]
    plain: list[Record] = [
        (f"key-{i}".encode(), (f"value-{i}-" * 20).encode(), []) for i in range(n_plain)
    ]
    return special + plain


def as_tuples(got: list[Got]) -> list[Record]:
    return [(g.key, g.value, [(k, v or b"") for k, v in g.headers]) for g in got]


def check_offsets(got: list[Got]) -> None:
    assert [g.offset for g in got] == list(range(len(got)))


# --- confluent-kafka -----------------------------------------------------------------------
def confluent_produce(bootstrap: str, topic: str, data: list[Record], codec: str) -> None:
    p = producer(bootstrap, compression_type=codec, linger_ms=20)
    recs: list[dict[str, Any]] = []
    for key, value, headers in data:
        r: dict[str, Any] = {"key": key, "value": value, "partition": 0}
        if headers:
            r["headers"] = headers
        recs.append(r)
    reports = produce_all(p, topic, recs)
    assert_delivered(reports)
    assert sorted(m.offset() for m in reports) == list(range(len(data)))


# --- kafka-python ------------------------------------------------------------------------
def kafka_python_produce(bootstrap: str, topic: str, data: list[Record], codec: str) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none"
                      else codec, linger_ms=20, request_timeout_ms=10000, acks=1)
    try:
        futures = [p.send(topic, key=k, value=v, headers=h, partition=0) for k, v, h in data]
        p.flush(timeout=OP_TIMEOUT_S)
        offsets = [f.get(timeout=OP_TIMEOUT_S).offset for f in futures]
        assert offsets == list(range(len(data)))
    finally:
        p.close(timeout=5)


def kafka_python_consume(bootstrap: str, topic: str, count: int, partition: int = 0,
                         offset: int = 0) -> list[Got]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", request_timeout_ms=11000,
                      fetch_max_wait_ms=100)
    try:
        tp = KPTopicPartition(topic, partition)
        c.assign([tp])
        c.seek(tp, offset)
        out: list[Got] = []
        for _ in range(100):
            if len(out) >= count:
                break
            for msgs in c.poll(timeout_ms=200).values():
                for m in msgs:
                    out.append(Got(m.partition, m.offset, m.key, m.value,
                                   list(m.headers or []), m.timestamp))
        assert len(out) >= count, f"kafka-python consumed {len(out)}/{count}"
        return out
    finally:
        c.close()


# --- aiokafka ----------------------------------------------------------------------------
async def aiokafka_produce(bootstrap: str, topic: str, data: list[Record], codec: str) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1,
                         compression_type=None if codec == "none" else codec,
                         request_timeout_ms=10000)
    await p.start()
    try:
        futs = [await p.send(topic, key=k, value=v, headers=h, partition=0) for k, v, h in data]
        metas = [await asyncio.wait_for(f, OP_TIMEOUT_S) for f in futs]
        assert [m.offset for m in metas] == list(range(len(data)))
    finally:
        await p.stop()


async def aiokafka_consume(bootstrap: str, topic: str, count: int) -> list[Got]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", fetch_max_wait_ms=100,
                         request_timeout_ms=11000)
    await c.start()
    try:
        tp = AIOTopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        out: list[Got] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OP_TIMEOUT_S
        while len(out) < count and loop.time() < deadline:
            batches = await c.getmany(tp, timeout_ms=200)
            for msgs in batches.values():
                for m in msgs:
                    out.append(Got(m.partition, m.offset, m.key, m.value,
                                   list(m.headers or []), m.timestamp))
        assert len(out) >= count, f"aiokafka consumed {len(out)}/{count}"
        return out
    finally:
        await c.stop()


# --- tests -----------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_roundtrip(broker: Broker, topic_name: str, codec: str) -> None:
    data = dataset()
    create_topic(broker.bootstrap, topic_name)
    confluent_produce(broker.bootstrap, topic_name, data, codec)
    got = consume_confluent(broker.bootstrap, topic_name, len(data))
    check_offsets(got)
    assert as_tuples(got) == data
    # and readable by another client implementation (decompression interop)
    assert as_tuples(kafka_python_consume(broker.bootstrap, topic_name, len(data))) == data


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_roundtrip(broker: Broker, topic_name: str, codec: str) -> None:
    data = dataset()
    create_topic(broker.bootstrap, topic_name)
    kafka_python_produce(broker.bootstrap, topic_name, data, codec)
    got = kafka_python_consume(broker.bootstrap, topic_name, len(data))
    check_offsets(got)
    assert as_tuples(got) == data
    assert as_tuples(consume_confluent(broker.bootstrap, topic_name, len(data))) == data


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_roundtrip(broker: Broker, topic_name: str, codec: str) -> None:
    data = dataset()
    create_topic(broker.bootstrap, topic_name)
    asyncio.run(aiokafka_produce(broker.bootstrap, topic_name, data, codec))
    got = asyncio.run(aiokafka_consume(broker.bootstrap, topic_name, len(data)))
    check_offsets(got)
    assert as_tuples(got) == data
    assert as_tuples(consume_confluent(broker.bootstrap, topic_name, len(data))) == data


def run_kcat(args: list[str], stdin: bytes | None = None, timeout: float = 20) -> bytes:
    assert KCAT is not None
    proc = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=timeout,
                          check=False)
    assert proc.returncode == 0, f"kcat {args} -> {proc.returncode}: {proc.stderr.decode()}"
    return proc.stdout


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
@pytest.mark.parametrize("codec", CODECS)
def test_kcat_roundtrip(broker: Broker, topic_name: str, codec: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    lines = [f"key{i}:value {i}" for i in range(50)] + [":no key here", "k-only:"]
    run_kcat(["-b", broker.bootstrap, "-P", "-t", topic_name, "-p", "0", "-K:", "-z", codec,
              "-X", "linger.ms=20"], stdin=("\n".join(lines) + "\n").encode())
    # headers (with a duplicate key) on one more message
    run_kcat(["-b", broker.bootstrap, "-P", "-t", topic_name, "-p", "0", "-K:", "-z", codec,
              "-H", "h1=a", "-H", "h1=b", "-H", "h2=c"], stdin=b"hk:hv\n")
    out = run_kcat(["-b", broker.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o",
                    "beginning", "-e", "-q", "-f", "%k|%s|%o|%p|%h\\n"])
    rows = out.decode().splitlines()
    assert len(rows) == len(lines) + 1, rows
    for i, (line, row) in enumerate(zip(lines, rows, strict=False)):
        key, _, value = line.partition(":")
        assert row.split("|")[:4] == [key, value, str(i), "0"]
    assert rows[-1].startswith(f"hk|hv|{len(lines)}|0|")
    assert rows[-1].split("|")[4] == "h1=a,h1=b,h2=c"
    # the same data seen by confluent-kafka
    got = consume_confluent(broker.bootstrap, topic_name, len(lines) + 1)
    assert got[-1].headers == [("h1", b"a"), ("h1", b"b"), ("h2", b"c")]
    assert got[0].key == b"key0" and got[0].value == b"value 0"


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
def test_kcat_reads_confluent_tombstone_and_null_key(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    p = producer(broker.bootstrap)
    assert_delivered(produce_all(p, topic_name, [
        {"key": b"a", "value": None, "partition": 0},
        {"key": None, "value": b"b", "partition": 0},
    ]))
    out = run_kcat(["-b", broker.bootstrap, "-C", "-t", topic_name, "-o", "beginning", "-e",
                    "-q", "-Z", "-f", "%k|%s|%S|%K\\n"])
    rows = out.decode().splitlines()
    # %S / %K print the value/key length: -1 for NULL with -Z
    assert rows == ["a|NULL|-1|1", "NULL|b|1|-1"], rows


N_PARTITIONS = 16


def test_many_partitions_keyed(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=N_PARTITIONS)
    p = producer(broker.bootstrap, linger_ms=10, compression_type="lz4")
    keys = [f"user-{i}".encode() for i in range(40)]
    recs = [{"key": keys[i % len(keys)], "value": f"{keys[i % len(keys)].decode()}:{i}".encode()}
            for i in range(400)]
    reports = produce_all(p, topic_name, recs)
    assert_delivered(reports)
    part_of_key: dict[bytes, set[int]] = defaultdict(set)
    for m in reports:
        part_of_key[m.key()].add(m.partition())
    assert all(len(parts) == 1 for parts in part_of_key.values()), part_of_key
    used = {m.partition() for m in reports}
    assert len(used) > 4, f"keyed records only landed on partitions {used}"

    got = consume_confluent(broker.bootstrap, topic_name, len(recs),
                            partitions=list(range(N_PARTITIONS)))
    by_part: dict[int, list[Got]] = defaultdict(list)
    for g in got:
        by_part[g.partition].append(g)
    for part, msgs in by_part.items():
        assert [g.offset for g in msgs] == list(range(len(msgs))), f"partition {part}"
        assert {next(iter(part_of_key[g.key])) for g in msgs} == {part}
        # per-key sequence numbers are increasing within a partition (ordering preserved)
        last: dict[bytes | None, int] = {}
        for g in msgs:
            assert g.value is not None
            seq = int(g.value.split(b":")[1])
            assert seq > last.get(g.key, -1)
            last[g.key] = seq
    assert sorted(int(g.value.split(b":")[1]) for g in got if g.value) == list(range(len(recs)))


def test_explicit_partitions_kafka_python(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=N_PARTITIONS)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, acks=1)
    try:
        futs = [p.send(topic_name, value=f"{part}-{i}".encode(), partition=part)
                for i in range(5) for part in range(N_PARTITIONS)]
        metas = [f.get(timeout=OP_TIMEOUT_S) for f in futs]
    finally:
        p.close(timeout=5)
    assert all(m.offset < 5 for m in metas)
    for part in (0, 7, 15):
        got = kafka_python_consume(broker.bootstrap, topic_name, 5, partition=part)
        assert [g.value for g in got] == [f"{part}-{i}".encode() for i in range(5)]
        assert [g.offset for g in got] == list(range(5))


def test_concurrent_producers_one_partition(broker: Broker, topic_name: str) -> None:
    """Several producers (own connections) appending at once: offsets unique and dense."""
    create_topic(broker.bootstrap, topic_name)
    n_threads, per_thread = 4, 100
    reports: list[list[Any]] = [[] for _ in range(n_threads)]

    def work(t: int) -> None:
        p = producer(broker.bootstrap, linger_ms=1)
        reports[t] = produce_all(p, topic_name, [
            {"value": f"t{t}-{i}".encode(), "partition": 0} for i in range(per_thread)])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    all_reports = [m for r in reports for m in r]
    assert_delivered(all_reports)
    total = n_threads * per_thread
    assert sorted(m.offset() for m in all_reports) == list(range(total))
    got = consume_confluent(broker.bootstrap, topic_name, total)
    by_offset = {m.offset(): m.value() for m in all_reports}
    assert all(by_offset[g.offset] == g.value for g in got)
    for t in range(n_threads):  # each producer's own order preserved
        mine = [int(g.value.split(b"-")[1]) for g in got if g.value and
                g.value.startswith(f"t{t}-".encode())]
        assert mine == list(range(per_thread))
