"""Durability: kill -9 mid-stream, recovery truncating garbage, clean restart + checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Message

from . import rawclient
from .helpers import (
    admin,
    assert_delivered,
    consume_confluent,
    create_topic,
    produce_all,
    producer,
    topic_partitions,
    watermarks,
)

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

FIRST_SEGMENT = "00000000000000000000.log"


def produce_until_killed(b: Broker, topic: str, kill_after: int,
                         total: int = 3000) -> list[Message]:
    """Produce acks=1 records; kill -9 the broker after ``kill_after`` delivery reports.

    Returns the successfully acknowledged delivery reports.
    """
    acked: list[Message] = []
    failed: list[Message] = []

    def cb(err: Any, msg: Message) -> None:
        (failed if err is not None else acked).append(msg)

    p = producer(b.bootstrap, acks="1", linger_ms=2, message_timeout_ms=2000,
                 retries=0, queue_buffering_max_messages=200)
    killed = False
    for i in range(total):
        while True:
            try:
                p.produce(topic, key=f"k{i}".encode(), value=f"value-{i:06d}".encode(),
                          partition=0, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        if len(acked) >= kill_after:
            b.kill()
            killed = True
            break
    if not killed:
        p.flush(5)
        b.kill()
    p.flush(5)
    p.purge()
    p.flush(1)
    assert len(acked) >= kill_after, f"only {len(acked)} acks before the kill"
    return acked


def read_all(b: Broker, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    _, hw = watermarks(b.bootstrap, topic)
    if hw == 0:
        return []
    got = consume_confluent(b.bootstrap, topic, hw)
    return [(g.offset, g.key, g.value) for g in got]


def test_kill9_keeps_acknowledged_records(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    acked = produce_until_killed(b, topic_name, kill_after=300)
    b.start()
    stored = read_all(b, topic_name)
    by_offset = {off: (k, v) for off, k, v in stored}
    assert [off for off, _, _ in stored] == list(range(len(stored))), "offset gap after recovery"
    for m in acked:
        assert by_offset.get(m.offset()) == (m.key(), m.value()), (
            f"acknowledged record at offset {m.offset()} lost or changed")
    hw = len(stored)
    assert hw >= max(m.offset() for m in acked) + 1
    # offsets continue after the recovered log end
    [new] = produce_all(producer(b.bootstrap), topic_name, [{"value": b"after", "partition": 0}])
    assert new.error() is None and new.offset() == hw

    # kill -9 again, then append garbage to the active segment: recovery truncates it
    b.kill()
    seg = b.data_dir / f"{topic_name}-0" / FIRST_SEGMENT
    valid_size = seg.stat().st_size
    with seg.open("ab") as f:
        f.write(b"\xde\xad\xbe\xef" * 300)
    b.start()
    assert seg.stat().st_size == valid_size, "garbage tail not truncated on recovery"
    assert watermarks(b.bootstrap, topic_name) == (0, hw + 1)
    stored2 = read_all(b, topic_name)
    assert stored2[-1][2] == b"after" and len(stored2) == hw + 1
    [more] = produce_all(producer(b.bootstrap), topic_name, [{"value": b"more", "partition": 0}])
    assert more.error() is None and more.offset() == hw + 1


def test_recovery_truncates_partial_batch(broker_factory: BrokerFactory, topic_name: str) -> None:
    """A half-written batch at the tail (valid header, missing bytes) is dropped."""
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    with rawclient.RawClient(b.bootstrap) as rc:
        for i in range(5):
            batch = rawclient.build_batch([rawclient.Rec(f"r{i}".encode())])
            assert rc.produce(topic_name, 0, batch).error_code == 0
    b.kill()
    seg = b.data_dir / f"{topic_name}-0" / FIRST_SEGMENT
    valid_size = seg.stat().st_size
    tail = rawclient.build_batch([rawclient.Rec(b"partial" * 50)])
    tail = (5).to_bytes(8, "big") + tail[8:]  # plausible base offset
    with seg.open("ab") as f:
        f.write(tail[: len(tail) // 2])
    b.start()
    assert seg.stat().st_size == valid_size
    assert watermarks(b.bootstrap, topic_name) == (0, 5)
    assert [v for _, _, v in read_all(b, topic_name)] == [f"r{i}".encode() for i in range(5)]


def test_recovery_drops_corrupted_tail_batch(broker_factory: BrokerFactory,
                                             topic_name: str) -> None:
    """A complete batch with a bad CRC at the tail is truncated, earlier ones survive."""
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    with rawclient.RawClient(b.bootstrap) as rc:
        for i in range(3):
            assert rc.produce(topic_name, 0, rawclient.build_batch(
                [rawclient.Rec(f"ok{i}".encode())])).error_code == 0
    b.kill()
    seg = b.data_dir / f"{topic_name}-0" / FIRST_SEGMENT
    valid_size = seg.stat().st_size
    bad = rawclient.corrupt_crc(rawclient.build_batch([rawclient.Rec(b"bad")]))
    with seg.open("ab") as f:
        f.write((3).to_bytes(8, "big") + bad[8:])
    b.start()
    assert seg.stat().st_size == valid_size
    assert watermarks(b.bootstrap, topic_name) == (0, 3)


def parse_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    lines = path.read_text().splitlines()
    assert lines[0] == "0", f"checkpoint version line: {lines[:1]}"
    count = int(lines[1])
    entries = lines[2:]
    assert len(entries) == count, f"checkpoint count {count} != {len(entries)} entries"
    out = {}
    for line in entries:
        topic, part, off = line.split(" ")
        out[(topic, int(part))] = int(off)
    return out


def test_clean_restart_keeps_topics_data_and_checkpoints(broker_factory: BrokerFactory,
                                                         topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=3,
                 config={"retention.ms": "7200000"})
    other = topic_name + "-x"
    create_topic(b.bootstrap, other)
    recs = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 3}
            for i in range(30)]
    assert_delivered(produce_all(producer(b.bootstrap), topic_name, recs))
    assert b.stop() == 0, "broker did not exit cleanly on SIGTERM"

    cp = b.data_dir / "recovery-point-offset-checkpoint"
    assert cp.exists(), "recovery-point-offset-checkpoint missing after clean shutdown"
    points = parse_checkpoint(cp)
    for part in range(3):
        assert points.get((topic_name, part)) == 10, points
    part_dir = b.data_dir / f"{topic_name}-0"
    for suffix in (".log", ".index", ".timeindex"):
        assert (part_dir / FIRST_SEGMENT.replace(".log", suffix)).exists(), suffix

    b.start()
    topics = admin(b.bootstrap).list_topics(timeout=5).topics
    assert topic_name in topics and other in topics
    assert topic_partitions(b.bootstrap, topic_name) == 3
    for part in range(3):
        assert watermarks(b.bootstrap, topic_name, part) == (0, 10)
        got = consume_confluent(b.bootstrap, topic_name, 10, partitions=[part])
        assert [g.value for g in got] == [f"v{i}".encode() for i in range(part, 30, 3)]
    [new] = produce_all(producer(b.bootstrap), topic_name, [{"value": b"n", "partition": 1}])
    assert new.error() is None and new.offset() == 10


def test_deleted_topic_stays_deleted_after_restart(broker_factory: BrokerFactory,
                                                   topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    a = admin(b.bootstrap)
    a.delete_topics([topic_name])[topic_name].result(10)
    b.restart()
    assert topic_name not in admin(b.bootstrap).list_topics(timeout=5).topics


def test_kill9_with_many_segments(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(log_segment_bytes=4096)
    create_topic(b.bootstrap, topic_name)
    p = producer(b.bootstrap, linger_ms=0)
    for chunk in range(0, 100, 10):
        assert_delivered(produce_all(p, topic_name, [
            {"value": f"seg-{i}".encode() * 30, "partition": 0} for i in range(chunk, chunk + 10)
        ]))
    b.kill()
    b.start()
    assert watermarks(b.bootstrap, topic_name) == (0, 100)
    got = consume_confluent(b.bootstrap, topic_name, 40, offset=60)
    assert [g.value for g in got] == [f"seg-{i}".encode() * 30 for i in range(60, 100)]
