"""Log lifecycle against a real broker: retention by time and size, crash-safe
segment deletion, segment roll by segment.ms (on append only, as Kafka)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import TopicPartition

from .helpers import (
    assert_delivered,
    consume_confluent,
    consumer,
    create_topic,
    produce_all,
    producer,
    watermarks,
)

if TYPE_CHECKING:
    from conftest import BrokerFactory

SMALL = {"log.segment.bytes": "2000", "log.retention.check.interval.ms": "200"}
HOUR_MS = 3600_000


def segment_files(data_dir: Path, topic: str, ext: str = ".log") -> list[str]:
    return sorted(f.name for f in (data_dir / f"{topic}-0").iterdir() if f.name.endswith(ext))


def produce_values(bootstrap: str, topic: str, values: list[bytes],
                   timestamp: int | None = None, key: bytes | None = None) -> None:
    p = producer(bootstrap, linger_ms=0, batch_num_messages=1)
    records: list[dict[str, object]] = [{"value": v, "key": key} for v in values]
    if timestamp is not None:
        for r in records:
            r["timestamp"] = timestamp
    assert_delivered(produce_all(p, topic, records))  # type: ignore[arg-type]


def wait_low_watermark(bootstrap: str, topic: str, at_least: int, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    low = -1
    while time.monotonic() < deadline:
        low, _ = watermarks(bootstrap, topic)
        if low >= at_least:
            return low
        time.sleep(0.2)
    raise AssertionError(f"log start offset of {topic} stayed at {low}")


def assert_contiguous(bootstrap: str, topic: str, expected: dict[int, bytes]) -> None:
    """Reading from the earliest offset gives exactly `expected` (offset -> value)."""
    low, high = watermarks(bootstrap, topic)
    assert low == min(expected) and high == max(expected) + 1
    got = consume_confluent(bootstrap, topic, len(expected), offset=low)
    assert {g.offset: g.value for g in got} == expected
    assert len(got) == len(expected)


def test_time_retention_deletes_expired_segments(broker_factory: BrokerFactory,
                                                 topic_name: str) -> None:
    b = broker_factory(SMALL)
    create_topic(b.bootstrap, topic_name, config={"retention.ms": "60000"})
    old = int(time.time() * 1000) - HOUR_MS
    old_values = [b"old-%03d" % i + b"." * 200 for i in range(30)]
    produce_values(b.bootstrap, topic_name, old_values, timestamp=old)
    new_values = [b"new-%03d" % i for i in range(5)]
    produce_values(b.bootstrap, topic_name, new_values)
    # every old segment goes; the one holding the new records (and maybe the
    # last old ones before them) stays whole
    low = wait_low_watermark(b.bootstrap, topic_name, 20)
    assert 20 <= low <= 30
    time.sleep(0.5)
    assert watermarks(b.bootstrap, topic_name)[0] == low
    assert segment_files(b.data_dir, topic_name) == [f"{low:020d}.log"]
    values = old_values + new_values
    assert_contiguous(b.bootstrap, topic_name, {i: values[i] for i in range(low, 35)})
    # below the log start: OFFSET_OUT_OF_RANGE -> auto.offset.reset=earliest lands on 30
    got = consume_confluent(b.bootstrap, topic_name, 1, offset=5)
    assert got[0].offset == low


def test_everything_expired_rolls_and_keeps_offsets(broker_factory: BrokerFactory,
                                                    topic_name: str) -> None:
    b = broker_factory(SMALL)
    create_topic(b.bootstrap, topic_name, config={"retention.ms": "1000"})
    old = int(time.time() * 1000) - HOUR_MS
    produce_values(b.bootstrap, topic_name, [b"x" * 100 for _ in range(12)], timestamp=old)
    assert wait_low_watermark(b.bootstrap, topic_name, 12) == 12
    assert watermarks(b.bootstrap, topic_name) == (12, 12)
    produce_values(b.bootstrap, topic_name, [b"after"])
    assert_contiguous(b.bootstrap, topic_name, {12: b"after"})


def test_size_retention_keeps_at_least_retention_bytes(broker_factory: BrokerFactory,
                                                       topic_name: str) -> None:
    b = broker_factory(SMALL)
    create_topic(b.bootstrap, topic_name, config={"retention.bytes": "4000"})
    values = [b"v%04d" % i + b"-" * 150 for i in range(100)]
    produce_values(b.bootstrap, topic_name, values)
    low = wait_low_watermark(b.bootstrap, topic_name, 1)
    time.sleep(0.5)  # let a second check run: nothing more may go
    low, high = watermarks(b.bootstrap, topic_name)
    part = b.data_dir / f"{topic_name}-0"
    sizes = [(part / n).stat().st_size for n in segment_files(b.data_dir, topic_name)]
    assert sum(sizes) >= 4000 and sum(sizes) - sizes[0] < 4000
    assert high == 100
    assert_contiguous(b.bootstrap, topic_name, {i: values[i] for i in range(low, high)})


def test_delete_policy_only(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(SMALL)
    create_topic(b.bootstrap, topic_name,
                 config={"retention.ms": "1000", "cleanup.policy": "compact"})
    old = int(time.time() * 1000) - HOUR_MS
    # keyed: a compacted topic refuses records without a key (Kafka's LogValidator)
    produce_values(b.bootstrap, topic_name, [b"x" * 100 for _ in range(30)], timestamp=old,
                   key=b"k")
    time.sleep(1.0)
    assert watermarks(b.bootstrap, topic_name) == (0, 30)


def test_leftover_deleted_files_after_crash_are_removed(broker_factory: BrokerFactory,
                                                        topic_name: str) -> None:
    """A crash mid-deletion leaves `*.deleted` files (and perhaps an index whose
    .log was already renamed): restart removes them and serves the rest."""
    b = broker_factory(SMALL)
    create_topic(b.bootstrap, topic_name)
    values = [b"r%03d" % i + b"." * 150 for i in range(60)]
    produce_values(b.bootstrap, topic_name, values)
    b.kill()
    part = b.data_dir / f"{topic_name}-0"
    logs = segment_files(b.data_dir, topic_name)
    assert len(logs) >= 4
    first, second = logs[0][:20], logs[1][:20]
    for ext in ("log", "index", "timeindex"):  # the oldest: fully renamed
        os.replace(part / f"{first}.{ext}", part / f"{first}.{ext}.deleted")
    os.replace(part / f"{second}.log", part / f"{second}.log.deleted")  # mid-rename
    b.start()
    names = sorted(f.name for f in part.iterdir())
    assert not [n for n in names if n.endswith(".deleted")]
    assert not [n for n in names if n.startswith(second)]
    third = int(logs[2][:20])
    assert_contiguous(b.bootstrap, topic_name, {i: values[i] for i in range(third, 60)})


def test_kill_during_retention_loses_and_duplicates_nothing(broker_factory: BrokerFactory,
                                                            topic_name: str) -> None:
    b = broker_factory(SMALL)
    create_topic(b.bootstrap, topic_name, config={"retention.bytes": "3000"})
    values = [b"k%04d" % i + b"-" * 150 for i in range(200)]
    p = producer(b.bootstrap, linger_ms=0, batch_num_messages=1)
    # produce in steps so deletions run while records arrive, then kill -9 mid-way
    for start in range(0, 200, 20):
        assert_delivered(produce_all(p, topic_name,
                                     [{"value": v} for v in values[start:start + 20]]))
        time.sleep(0.05)
    b.kill()
    b.start()
    # retention may still have segments to delete after the restart: let it settle
    low, high = watermarks(b.bootstrap, topic_name)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.6)
        settled = watermarks(b.bootstrap, topic_name)
        if settled == (low, high):
            break
        low, high = settled
    assert high == 200 and low > 0
    assert_contiguous(b.bootstrap, topic_name, {i: values[i] for i in range(low, high)})


def test_segment_ms_rolls_on_append_only(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, config={"segment.ms": "300"})
    produce_values(b.bootstrap, topic_name, [b"first"])
    time.sleep(0.8)
    assert segment_files(b.data_dir, topic_name) == [f"{0:020d}.log"]  # no roll while idle
    produce_values(b.bootstrap, topic_name, [b"second"])
    assert segment_files(b.data_dir, topic_name) == [f"{0:020d}.log", f"{1:020d}.log"]
    assert_contiguous(b.bootstrap, topic_name, {0: b"first", 1: b"second"})


@pytest.mark.parametrize("retention", ["retention.ms", "retention.bytes"])
def test_retention_survives_restart(broker_factory: BrokerFactory, topic_name: str,
                                    retention: str) -> None:
    b = broker_factory(SMALL)
    config = {"retention.ms": "60000"} if retention == "retention.ms" else {
        "retention.bytes": "2500"}
    create_topic(b.bootstrap, topic_name, config=config)
    ts = int(time.time() * 1000) - HOUR_MS if retention == "retention.ms" else None
    produce_values(b.bootstrap, topic_name, [b"z" * 150 for _ in range(40)], timestamp=ts)
    low = wait_low_watermark(b.bootstrap, topic_name, 1)
    b.restart()
    low2, high2 = watermarks(b.bootstrap, topic_name)
    assert low2 >= low and high2 == 40
    c = consumer(b.bootstrap)
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert lo >= low2 and hi == high2  # retention may go on after the restart
    finally:
        c.close()
