"""The log side of transactions against a real broker, by raw socket: transactional
batches written by hand, markers written with WriteTxnMarkers, and what consumers
see: read_committed stops at the last stable offset and skips aborted records,
read_uncommitted sees everything, ListOffsets read_committed answers the LSO."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AIOTopicPartition
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, TopicPartition

from tests.integration.helpers import consume_confluent, consumer, create_topic
from tests.integration.rawclient import RawClient
from tests.transaction.txnraw import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    fetch,
    init_producer_id,
    list_latest,
    record_offsets,
    txn_batch,
    write_markers,
)

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52


def now_ms() -> int:
    return int(time.time() * 1000)


def values(got: list) -> list[bytes]:  # type: ignore[type-arg]
    return [g.value for g in got]


def kafka_python_values(bootstrap: str, topic: str, isolation: str, count: int) -> list[bytes]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      consumer_timeout_ms=10000)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        out: list[bytes] = []
        for msg in c:
            out.append(msg.value)
            if len(out) >= count:
                break
        return out
    finally:
        c.close()


def test_read_committed_skips_aborted_and_stops_at_the_lso(broker: Broker,
                                                           topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as c:
        a, a_epoch = init_producer_id(c)
        b, b_epoch = init_producer_id(c)
        assert c.produce(topic_name, 0, txn_batch(-1, -1, -1, ["plain0"], False)).error_code == 0
        time.sleep(0.005)
        after_plain = now_ms()
        assert c.produce(topic_name, 0, txn_batch(a, a_epoch, 0, ["a0", "a1"])).base_offset == 1
        assert c.produce(topic_name, 0, txn_batch(b, b_epoch, 0, ["b0"])).base_offset == 3
        # two transactions open: read_committed stops at the first one's first offset
        assert list_latest(c, topic_name, READ_COMMITTED) == 1
        assert list_latest(c, topic_name, READ_UNCOMMITTED) == 4
        # by timestamp: read_committed finds nothing at or past the LSO
        assert list_latest(c, topic_name, READ_UNCOMMITTED, timestamp=0) == 0
        assert list_latest(c, topic_name, READ_COMMITTED, timestamp=0) == 0
        assert list_latest(c, topic_name, READ_UNCOMMITTED, timestamp=after_plain) == 1
        assert list_latest(c, topic_name, READ_COMMITTED, timestamp=after_plain) == -1
        f = fetch(c, topic_name, 0)
        assert (f.high_watermark, f.last_stable_offset) == (4, 1)
        assert record_offsets(f.records) == [0]
        assert f.aborted == []
        assert fetch(c, topic_name, 1).records == b""
        unc = fetch(c, topic_name, 0, READ_UNCOMMITTED)
        assert record_offsets(unc.records) == [0, 1, 2, 3]
        assert unc.aborted is None

        assert write_markers(c, a, a_epoch, False, [(topic_name, 0)]) == {(topic_name, 0): NONE}
        # A aborted at 4; B still open from 3
        f = fetch(c, topic_name, 0)
        assert f.last_stable_offset == 3
        assert record_offsets(f.records) == [0, 1, 2]
        assert f.aborted == [(a, 1)]
        assert write_markers(c, b, b_epoch, True, [(topic_name, 0)]) == {(topic_name, 0): NONE}
        assert list_latest(c, topic_name, READ_COMMITTED) == 6
        f = fetch(c, topic_name, 0)
        assert (f.high_watermark, f.last_stable_offset, f.aborted) == (6, 6, [(a, 1)])
        # A's range ends with its marker at 4: a fetch from 5 is told nothing of it
        assert fetch(c, topic_name, 4).aborted == [(a, 1)]
        assert fetch(c, topic_name, 5).aborted == []
        assert c.produce(topic_name, 0, txn_batch(-1, -1, -1, ["plain6"], False)).error_code == 0

    committed = consume_confluent(broker.bootstrap, topic_name, 3,
                                  **{"isolation.level": "read_committed"})
    assert values(committed) == [b"plain0", b"b0", b"plain6"]
    assert [g.offset for g in committed] == [0, 3, 6]
    uncommitted = consume_confluent(broker.bootstrap, topic_name, 5,
                                    **{"isolation.level": "read_uncommitted"})
    assert values(uncommitted) == [b"plain0", b"a0", b"a1", b"b0", b"plain6"]
    assert kafka_python_values(broker.bootstrap, topic_name, "read_committed", 3) == [
        b"plain0", b"b0", b"plain6"]
    assert kafka_python_values(broker.bootstrap, topic_name, "read_uncommitted", 5) == [
        b"plain0", b"a0", b"a1", b"b0", b"plain6"]
    assert asyncio.run(aiokafka_values(broker.bootstrap, topic_name, "read_committed", 3)) == [
        b"plain0", b"b0", b"plain6"]
    assert asyncio.run(aiokafka_values(broker.bootstrap, topic_name, "read_uncommitted",
                                       5)) == [b"plain0", b"a0", b"a1", b"b0", b"plain6"]


async def aiokafka_values(bootstrap: str, topic: str, isolation: str, count: int) -> list[bytes]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", fetch_max_wait_ms=100,
                         isolation_level=isolation, request_timeout_ms=11000)
    await c.start()
    try:
        tp = AIOTopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        out: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(out) < count and time.monotonic() < deadline:
            for msgs in (await c.getmany(tp, timeout_ms=200)).values():
                out.extend(m.value for m in msgs)
        return out
    finally:
        await c.stop()


def test_an_open_transaction_blocks_read_committed_until_its_marker(
        broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as c:
        pid, epoch = init_producer_id(c)
        assert c.produce(topic_name, 0, txn_batch(pid, epoch, 0, ["t0", "t1"])).error_code == 0
        assert c.produce(topic_name, 0, txn_batch(-1, -1, -1, ["after"], False)).error_code == 0
        # the consumer sees nothing while the transaction is open (LSO 0) ...
        assert poll_nothing(broker.bootstrap, topic_name, seconds=3)
        # ... and a long-poll read_committed fetch is woken by the marker
        with RawClient(broker.bootstrap) as waiter:
            waiter.send(1, 4, _fetch_body(topic_name, 0, max_wait_ms=20000))
            assert write_markers(c, pid, epoch, True, [(topic_name, 0)]) == {
                (topic_name, 0): NONE}
            _, body = waiter.recv()
        from tests.integration.rawclient import Reader
        r = Reader(body)
        r.i32(), r.i32(), r.string(), r.i32(), r.i32(), r.i16()
        assert (r.i64(), r.i64()) == (4, 4)
    got = consume_confluent(broker.bootstrap, topic_name, 3,
                            **{"isolation.level": "read_committed"})
    assert values(got) == [b"t0", b"t1", b"after"]


def poll_nothing(bootstrap: str, topic: str, seconds: float) -> bool:
    """A read_committed confluent-kafka consumer gets no record for `seconds`."""
    c = consumer(bootstrap, **{"isolation.level": "read_committed"})
    try:
        c.assign([ConfluentTopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                return False
        return True
    finally:
        c.close()


def _fetch_body(topic: str, offset: int, max_wait_ms: int) -> bytes:
    from tests.integration.rawclient import array, i8, i32, i64, string
    part = i32(0) + i64(offset) + i32(1 << 20)
    return (i32(-1) + i32(max_wait_ms) + i32(1) + i32(1 << 20) + i8(READ_COMMITTED)
            + array([string(topic) + array([part])]))


def test_marker_and_transactional_produce_errors(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    tp = (topic_name, 0)
    with RawClient(broker.bootstrap) as c:
        pid, epoch = init_producer_id(c)
        assert c.produce(topic_name, 0, txn_batch(pid, epoch, 0, ["x"])).error_code == 0
        # a non-transactional write while the transaction is open
        assert c.produce(topic_name, 0, txn_batch(pid, epoch, 1, ["y"], False)
                         ).error_code == INVALID_TXN_STATE
        assert write_markers(c, pid, epoch, False, [tp], coordinator_epoch=5) == {tp: NONE}
        # an older coordinator is fenced; an older producer epoch is refused
        assert write_markers(c, pid, epoch, True, [tp], coordinator_epoch=4) == {
            tp: TRANSACTION_COORDINATOR_FENCED}
        assert write_markers(c, pid, epoch + 1, True, [tp], coordinator_epoch=5) == {tp: NONE}
        assert write_markers(c, pid, epoch, True, [tp], coordinator_epoch=5) == {
            tp: INVALID_PRODUCER_EPOCH}
        # the producer of the older epoch is a zombie now: its writes are refused
        assert c.produce(topic_name, 0, txn_batch(pid, epoch, 1, ["z"])
                         ).error_code == INVALID_PRODUCER_EPOCH
        assert write_markers(c, pid, epoch + 1, True, [("no-such-topic", 0), (topic_name, 7)],
                             coordinator_epoch=5) == {
            ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
            (topic_name, 7): UNKNOWN_TOPIC_OR_PARTITION}
        # the markers without a transaction ended nothing; the abort is indexed
        f = fetch(c, topic_name, 0)
        assert (f.high_watermark, f.last_stable_offset, f.aborted) == (3, 3, [(pid, 0)])


def test_lso_lag_metric(broker_factory: BrokerFactory, topic_name: str) -> None:
    from tests.conftest import free_port
    port = free_port()
    b = broker_factory(metrics_port=port)
    create_topic(b.bootstrap, topic_name)
    labels = f'topic="{topic_name}",partition="0"'

    def lag() -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        line = next(ln for ln in text.splitlines()
                    if ln.startswith(f"pybroker_last_stable_offset_lag{{{labels}}}"))
        return float(line.rsplit(" ", 1)[1])

    # the metrics listener may come up a moment after the broker's
    deadline = time.monotonic() + 10
    while True:
        try:
            assert lag() == 0
            break
        except OSError:
            assert time.monotonic() < deadline, "metrics endpoint not up"
            time.sleep(0.1)
    with RawClient(b.bootstrap) as c:
        pid, epoch = init_producer_id(c)
        assert c.produce(topic_name, 0, txn_batch(pid, epoch, 0, ["t0", "t1"])).error_code == 0
        assert c.produce(topic_name, 0, txn_batch(-1, -1, -1, ["x"], False)).error_code == 0
        assert lag() == 3
        assert write_markers(c, pid, epoch, False, [(topic_name, 0)]) == {(topic_name, 0): NONE}
        assert lag() == 0
