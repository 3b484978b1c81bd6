"""Idempotent producer state of `PartitionLog` (rust/log/src/producer_state.rs):
duplicates, sequence gaps, stale epochs and `.snapshot` persistence."""

from __future__ import annotations

import struct

import pytest

_core = pytest.importorskip("pybroker._core")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from pybroker._core import (  # noqa: E402
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    PartitionLog,
)


def pbatch(pid: int, epoch: int, seq: int, n: int = 2, ts: int = 1_000) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20,
    )
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k", value=b"v%d" % i, headers=[])
    return bytes(b.build())


def test_duplicate_retry_returns_original_offset_and_appends_nothing(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    log.append(pbatch(-1, -1, -1, 3), 0, 1)
    first = log.append(pbatch(7, 0, 0), 0, 1)
    assert (first.base_offset, first.duplicate_count) == (3, 0)
    size = log.size_bytes
    again = log.append(pbatch(7, 0, 0), 0, 1)
    assert (again.base_offset, again.last_offset) == (3, 4)
    assert (again.record_count, again.batch_count, again.duplicate_count) == (0, 0, 1)
    assert log.log_end_offset == 5
    assert log.size_bytes == size
    assert log.producer_count == 1


def test_gap_and_stale_epoch_are_rejected(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    log.append(pbatch(7, 1, 0), 0, 1)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(7, 1, 5), 0, 1)
    with pytest.raises(InvalidProducerEpochError):
        log.append(pbatch(7, 0, 2), 0, 1)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(7, 2, 2), 0, 1)  # a new epoch starts at 0
    assert log.log_end_offset == 2
    log.append(pbatch(7, 2, 0), 0, 1)
    assert log.log_end_offset == 4


def test_all_or_none_with_several_batches(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(7, 0, 0) + pbatch(7, 0, 3), 0, 1)
    assert log.log_end_offset == 0
    r = log.append(pbatch(7, 0, 0) + pbatch(7, 0, 2) + pbatch(7, 0, 2), 0, 1)
    assert (r.base_offset, r.last_offset, r.batch_count, r.duplicate_count) == (0, 3, 2, 1)
    assert log.log_end_offset == 4


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_restart(tmp_path, clean):
    path = str(tmp_path / "t-0")
    log = PartitionLog(path, segment_bytes=300)
    offsets = [log.append(pbatch(9, 0, 2 * i), 0, 1).base_offset for i in range(10)]
    assert log.segment_count > 1
    if clean:
        log.close()
    else:
        del log  # no close: no snapshot at the log end; rebuilt from the log
    log = PartitionLog(path, segment_bytes=300, clean_shutdown=clean)
    dup = log.append(pbatch(9, 0, 18), 0, 1)
    assert (dup.duplicate_count, dup.base_offset) == (1, offsets[-1])
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(9, 0, 21), 0, 1)
    assert log.append(pbatch(9, 0, 20), 0, 1).base_offset == 20
    log.close()


def test_snapshot_file_is_kafka_format(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog(str(d))
    log.append(pbatch(42, 3, 0, n=4, ts=5_000), 0, 1)
    log.close()
    (snap,) = sorted(d.glob("*.snapshot"))
    assert snap.name == "00000000000000000004.snapshot"
    data = snap.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1)
    assert crc == _core.crc32c(data[6:])
    entry = struct.unpack_from(">qhiqiqiq", data, 10)
    assert entry == (42, 3, 3, 3, 3, 5_003, -1, -1)
    assert len(data) == 10 + 46


def test_truncation_drops_later_snapshots(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog(str(d), segment_bytes=300)
    for i in range(10):
        log.append(pbatch(9, 0, 2 * i), 0, 1)
    log.truncate_to(6)
    assert all(int(p.stem) <= 6 for p in d.glob("*.snapshot"))
    assert log.append(pbatch(9, 0, 4), 0, 1).duplicate_count == 1
    assert log.append(pbatch(9, 0, 6), 0, 1).base_offset == 6
    log.close()
