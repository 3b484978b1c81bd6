"""Retention rules (pure) and retention applied to a real partition log."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker._core import AppendResult
from pybroker._core import OffsetOutOfRangeError
from pybroker.config import BrokerConfig, TopicConfig
from pybroker.log.partition import Partition
from pybroker.log.retention import apply_retention, deletable_count

NOW = 10_000_000


def leader_append(p: Partition, records: object) -> AppendResult:
    """Append as the only replica's leader (epoch 0): the high watermark follows."""
    result = p.append(records, 0)  # type: ignore[arg-type]
    p.update_high_watermark(p.log.log_end_offset)
    return result


def count(segments: list[tuple[int, int, int]], leo: int, **kw: int) -> int:
    kw.setdefault("retention_ms", -1)
    kw.setdefault("retention_bytes", -1)
    return deletable_count(segments, leo, kw.pop("hw", leo), now_ms=NOW, **kw)[0]


def test_time_deletes_segments_whose_largest_timestamp_expired() -> None:
    segs = [(0, 100, NOW - 5000), (10, 100, NOW - 3000), (20, 100, NOW - 10)]
    assert count(segs, 30, retention_ms=4000) == 1
    assert count(segs, 30, retention_ms=2000) == 2
    assert count(segs, 30, retention_ms=1) == 3  # all: the caller rolls first
    assert count(segs, 30, retention_ms=-1) == 0


def test_time_stops_at_first_kept_segment() -> None:
    # a newer timestamp in an old segment keeps it and everything after
    segs = [(0, 100, NOW), (10, 100, NOW - 9000), (20, 100, NOW - 10)]
    assert count(segs, 30, retention_ms=1000) == 0


def test_time_falls_back_to_mtime_without_timestamps() -> None:
    segs = [(0, 100, -1), (10, 100, NOW)]
    got = deletable_count(segs, 20, 20, retention_ms=1000, retention_bytes=-1, now_ms=NOW,
                          mtime_ms=lambda base: NOW - 5000)
    assert got[0] == 1 and "time" in got[1]


def test_size_deletes_oldest_while_rest_still_reaches_retention_bytes() -> None:
    segs = [(0, 100, NOW), (10, 100, NOW), (20, 100, NOW), (30, 50, NOW)]
    # total 350: deleting 100 leaves 250 >= 200, deleting another leaves 150 < 200
    assert count(segs, 40, retention_bytes=200) == 1
    assert count(segs, 40, retention_bytes=150) == 2
    assert count(segs, 40, retention_bytes=350) == 0
    assert count(segs, 40, retention_bytes=0) == 4


def test_never_past_high_watermark_nor_an_empty_active_segment() -> None:
    segs = [(0, 100, NOW - 9000), (10, 100, NOW - 9000), (20, 0, -1)]
    assert count(segs, 20, retention_ms=1) == 2
    assert count(segs, 20, retention_ms=1, hw=15) == 1


def batch(n: int, ts: int, size: int = 100, key: bytes | None = None) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts, key=key, value=b"v" * size, headers=[])
    return bytes(b.build())


def partition(tmp_path: Path, **overrides: object) -> Partition:
    broker = BrokerConfig({"log.segment.bytes": "1000"})
    return Partition("t", 0, tmp_path / "t-0", TopicConfig(broker, overrides),
                     recovery_point=0, log_start_offset=0, clean_shutdown=False)


def test_apply_time_retention_moves_log_start_and_deletes_files(tmp_path: Path) -> None:
    p = partition(tmp_path, **{"retention.ms": 1000})
    for i in range(10):  # ~8 segments of ~300 bytes batches, old timestamps
        leader_append(p, memoryview(batch(2, NOW - 100_000 + i)))
    leader_append(p, memoryview(batch(2, NOW)))
    before = p.log.segment_infos()
    assert len(before) > 3
    # the segment holding the new batch (offsets 20-21) stays, all before it go
    kept = max(base for base, _, _ in before if base <= 20)
    deleted = apply_retention(p, NOW)
    after = p.log.segment_infos()
    assert deleted == len(before) - 1 == len(before) - len(after)
    assert p.log.log_start_offset == after[0][0] == kept
    assert p.log.log_end_offset == 22
    names = sorted(f.name for f in (tmp_path / "t-0").iterdir())
    assert not [n for n in names if n.endswith(".deleted")]
    assert [n for n in names if n.endswith(".log")] == [f"{kept:020d}.log"]
    with pytest.raises(OffsetOutOfRangeError):
        p.read(kept - 1, 1 << 20, True)
    assert p.read(kept, 1 << 20, True) is not None
    p.close()


def test_apply_retention_of_everything_rolls_and_keeps_offsets(tmp_path: Path) -> None:
    p = partition(tmp_path, **{"retention.ms": 1000})
    for _ in range(5):
        leader_append(p, memoryview(batch(2, NOW - 100_000)))
    apply_retention(p, NOW)
    assert p.log.log_start_offset == p.log.log_end_offset == 10
    assert p.log.segment_infos() == [(10, 0, -1)]
    assert leader_append(p, memoryview(batch(1, NOW))).base_offset == 10
    p.close()


def test_apply_size_retention(tmp_path: Path) -> None:
    p = partition(tmp_path, **{"retention.bytes": 1000})
    for i in range(20):
        leader_append(p, memoryview(batch(2, NOW + i)))
    apply_retention(p, NOW)
    assert p.log.size_bytes >= 1000
    assert p.log.size_bytes - p.log.segment_infos()[0][1] < 1000
    p.close()


def test_compact_only_topics_are_not_retained(tmp_path: Path) -> None:
    p = partition(tmp_path, **{"retention.ms": 1, "cleanup.policy": ["compact"]})
    for _ in range(5):
        # a compacted topic refuses records without a key (Kafka's LogValidator)
        leader_append(p, memoryview(batch(2, NOW - 100_000, key=b"k")))
    assert apply_retention(p, NOW) == 0
    assert p.log.log_start_offset == 0
    p.close()
