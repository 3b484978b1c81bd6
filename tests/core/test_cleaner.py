"""Compaction through the binding: `PartitionLog.clean` (rust/log/src/cleaner.rs)."""

from __future__ import annotations

import time

import pytest

_core = pytest.importorskip("pybroker._core")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from pybroker._core import PartitionLog  # noqa: E402

NOW = int(time.time() * 1000)


def kv_batch(records: list[tuple[bytes, bytes | None]], ts: int, codec: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=ts, key=k, value=v, headers=[])
    return bytes(b.build())


def rows(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out, offset = [], log.log_start_offset
    while (s := log.read(offset, 1 << 20, min_one=True)) is not None:
        data = s.read()
        pos = 0
        while pos < len(data):
            length = int.from_bytes(data[pos + 8:pos + 12], "big")
            batch = data[pos:pos + 12 + length]
            for off, _ts, _seq, k, v, _h in _core.decode_batch(batch):
                out.append((off, k, v))
            base = int.from_bytes(batch[:8], "big")
            offset = base + int.from_bytes(batch[23:27], "big", signed=True) + 1
            pos += 12 + length
    return out


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_clean_keeps_newest_value_per_key(tmp_path, codec):
    log = PartitionLog(str(tmp_path / "t-0"), segment_bytes=500)
    for i in range(30):
        log.append(kv_batch([(b"k%d" % (i % 3), b"v%d" % i), (b"z", b"z%d" % i)], NOW, codec),
                   0, NOW)
    log.roll()
    before = rows(log)
    stats = log.clean(0, now_ms=NOW)
    assert stats.first_dirty_offset == log.log_end_offset == 60
    assert stats.records_removed == 56 and stats.segments_cleaned > 1
    assert stats.bytes_written < stats.bytes_read
    after = rows(log)
    assert after == [r for r in before if r[0] in (54, 56, 58, 59)]
    log.close()
    reopened = PartitionLog(str(tmp_path / "t-0"), segment_bytes=500)
    assert rows(reopened) == after


def test_tombstones_respect_delete_retention(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    log.append(kv_batch([(b"a", b"1"), (b"b", b"1")], NOW - 60_000), 0, NOW)
    log.append(kv_batch([(b"a", None)], NOW - 60_000), 0, NOW)
    log.roll()
    kept = log.clean(0, now_ms=NOW, delete_retention_ms=120_000)
    assert [r[0] for r in rows(log)] == [1, 2]
    assert kept.records_removed == 1
    log.clean(0, now_ms=NOW, delete_retention_ms=30_000)
    assert rows(log) == [(1, b"b", b"1")]


def test_min_compaction_lag_and_throttle(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), segment_bytes=300)
    for i in range(20):
        log.append(kv_batch([(b"k", b"%d" % i)], NOW), 0, NOW)
    log.roll()
    lagged = log.clean(0, now_ms=NOW, min_compaction_lag_ms=60_000)
    assert (lagged.first_dirty_offset, lagged.records_removed) == (0, 0)
    start = time.monotonic()
    stats = log.clean(0, now_ms=NOW, max_bytes_per_second=20_000)
    elapsed = time.monotonic() - start
    assert stats.records_removed == 19
    assert elapsed >= (stats.bytes_read + stats.bytes_written) / 20_000 * 0.8
    assert rows(log) == [(19, b"k", b"19")]
