"""Compaction scheduled by the broker: a compacted topic with updates and
tombstones reads back one value per key at unchanged offsets; the cleaner
checkpoint is written in Kafka's format and honoured after a restart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import TopicPartition

from .helpers import (
    assert_delivered,
    consumer,
    create_topic,
    produce_all,
    producer,
    watermarks,
)

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

HOUR_MS = 3600_000
KEYS = 10
ROUNDS = 15
DELETED = (b"k0", b"k1", b"k2")


def cleaner_checkpoint(data_dir: Path, topic: str) -> int | None:
    path = data_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.rsplit(" ", 2)
        if (name, partition) == (topic, "0"):
            return int(offset)
    return None


def read_all(b: Broker, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from the log start to the high watermark (a compacted log
    has gaps: read up to the watermark, not a count)."""
    low, high = watermarks(b.bootstrap, topic)
    c = consumer(b.bootstrap)
    out: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        c.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None or msg.error():
                if out and out[-1][0] >= high - 1:
                    break
                continue
            out.append((msg.offset(), msg.key(), msg.value()))
            if msg.offset() >= high - 1:
                break
    finally:
        c.close()
    return out


def test_compacted_topic_keeps_latest_value_per_key(broker_factory: BrokerFactory,
                                                    topic_name: str) -> None:
    b = broker_factory(log_cleaner_backoff_ms=200)
    create_topic(b.bootstrap, topic_name, config={
        "cleanup.policy": "compact", "segment.bytes": "1000",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100"})
    p = producer(b.bootstrap, linger_ms=0, batch_num_messages=1)
    old = int(time.time() * 1000) - HOUR_MS
    records: list[dict[str, Any]] = [
        {"key": b"k%d" % k, "value": b"v%d-%d" % (k, r) + b"." * 30, "timestamp": old}
        for r in range(ROUNDS) for k in range(KEYS)]
    records += [{"key": k, "value": None, "timestamp": old} for k in DELETED]
    # unique keys after them push every update out of the active segment
    records += [{"key": b"filler-%d" % i, "value": b"f" * 40} for i in range(40)]
    reports = produce_all(p, topic_name, records)
    assert_delivered(reports)
    produced = {m.offset(): (m.key(), m.value()) for m in reports}
    last: dict[bytes, int] = {}
    for offset, (key, _) in sorted(produced.items()):
        last[key] = offset

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not cleaner_checkpoint(b.data_dir, topic_name):
        time.sleep(0.2)
    checkpoint = cleaner_checkpoint(b.data_dir, topic_name)
    assert checkpoint and checkpoint > ROUNDS * KEYS, checkpoint

    def check(rows: list[tuple[int, bytes | None, bytes | None]]) -> None:
        assert rows, "nothing read back"
        for offset, key, value in rows:  # offsets unchanged
            assert produced[offset] == (key, value)
        cleaned = [r for r in rows if r[0] < checkpoint]
        keys = [k for _, k, _ in cleaned]
        assert len(keys) == len(set(keys)), "a key twice in the cleaned part"
        for offset, key, _ in cleaned:
            assert last[key] == offset or offset >= checkpoint
        survivors = {k for _, k, v in rows if v is not None}
        assert survivors >= {b"k%d" % k for k in range(3, KEYS)}
        assert not survivors & set(DELETED)
        # old tombstones (older than delete.retention.ms) went too
        assert not [k for o, k, v in cleaned if v is None]
        values = {k: v for _, k, v in rows}
        for k in range(3, KEYS):
            assert values[b"k%d" % k] == b"v%d-%d" % (k, ROUNDS - 1) + b"." * 30

    rows = read_all(b, topic_name)
    check(rows)
    assert len(rows) < len(produced)
    size = sum(f.stat().st_size for f in (b.data_dir / f"{topic_name}-0").glob("*.log"))
    assert size < 20_000  # ~40 KB were produced
    b.restart()
    assert cleaner_checkpoint(b.data_dir, topic_name) == checkpoint
    check(read_all(b, topic_name))
