"""What `PartitionLog.close` writes (rust/log/src/log.rs), issue 25: a clean stop closes
every log, and a write a reopen does not need was an fsync per log (a broker with
10,000 empty logs took 15.9 s to exit). What close leaves must still reopen, with the
clean-shutdown flag (no recovery), to the state the log had."""

from __future__ import annotations

import pytest

_core = pytest.importorskip("pybroker._core")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from pybroker._core import PartitionLog  # noqa: E402

CHECKPOINT = "leader-epoch-checkpoint"


def pbatch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_000 + i, key=b"k", value=b"v%d" % i, headers=[])
    return bytes(b.build())


def test_an_empty_log_is_closed_without_a_snapshot_or_an_epoch_checkpoint(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog(str(d))  # a follower's new log: no leader epoch, no record
    log.close()
    assert not list(d.glob("*.snapshot"))
    assert not (d / CHECKPOINT).exists()
    assert not list(d.glob("*.tmp"))
    # reopened as after a clean shutdown: the state it had
    log = PartitionLog(str(d), clean_shutdown=True)
    assert (log.log_end_offset, log.latest_epoch, log.producer_count) == (0, None, 0)
    # what it learns later is written as before: the first epoch at once, the producer
    # state at the next close
    log.append(pbatch(7, 0, 0), 3, 1)
    assert (d / CHECKPOINT).read_text() == "0\n1\n3 0\n"
    log.close()
    assert [p.name for p in d.glob("*.snapshot")] == ["00000000000000000002.snapshot"]
    log = PartitionLog(str(d), clean_shutdown=True)
    assert (log.log_end_offset, log.latest_epoch, log.producer_count) == (2, 3, 1)
    assert log.append(pbatch(7, 0, 0), 3, 1).duplicate_count == 1
    log.close()


def test_an_empty_log_led_writes_its_epoch_at_once_and_no_snapshot(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog(str(d))
    log.assign_leader_epoch(4, 0)  # a new partition's leader: written at once, as before
    assert (d / CHECKPOINT).read_text() == "0\n1\n4 0\n"
    log.close()
    assert not list(d.glob("*.snapshot"))
    assert (d / CHECKPOINT).read_text() == "0\n1\n4 0\n"
    log = PartitionLog(str(d), clean_shutdown=True)
    assert (log.log_end_offset, log.producer_count) == (0, 0)
    log.close()


def test_a_log_emptied_of_its_records_keeps_its_snapshots_as_before(tmp_path):
    # a log with batches is not "empty" for close: its snapshot is written as before
    # (a reopen without it would replay the batches), and one left on disk is kept
    d = tmp_path / "t-0"
    log = PartitionLog(str(d))
    log.append(pbatch(7, 0, 0), 0, 1)
    log.close()
    assert [p.name for p in d.glob("*.snapshot")] == ["00000000000000000002.snapshot"]
    log = PartitionLog(str(d), clean_shutdown=True)
    assert log.producer_count == 1
    log.close()
    assert [p.name for p in d.glob("*.snapshot")] == ["00000000000000000002.snapshot"]
