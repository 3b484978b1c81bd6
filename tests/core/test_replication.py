"""Replication through `pybroker._core.PartitionLog`: a follower appends the bytes
its leader serves (append_as_follower), the leader-epoch cache answers
OffsetForLeaderEpoch (end_offset_for_epoch), a returning follower truncates by
epoch and catches up, and idempotent producer state travels with the batches."""

from __future__ import annotations

from pathlib import Path

import pytest

_core = pytest.importorskip("pybroker._core")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from pybroker._core import (  # noqa: E402
    CorruptRecordError,
    PartitionLog,
    UnexpectedAppendOffsetError,
)

NOW = 1_700_000_000_000


def make_batch(n: int, *, producer_id: int = -1, sequence: int = -1, size: int = 20) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence,
        batch_size=1 << 20,
    )
    for i in range(n):
        b.append(i, timestamp=NOW + i, key=b"k%d" % i, value=b"v" * size, headers=[])
    return bytes(b.build())


def open_log(path: Path, **kw: object) -> PartitionLog:
    return PartitionLog(str(path), segment_bytes=800, index_interval_bytes=256, **kw)  # type: ignore[arg-type]


def log_bytes(path: Path) -> bytes:
    """The .log files concatenated in offset order (independent of where they roll)."""
    return b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))


def fetch(leader: PartitionLog, follower: PartitionLog, max_bytes: int = 500) -> bool:
    """One follower fetch: what the leader serves from the follower's end, appended
    as follower. False when there was nothing new."""
    s = leader.read(follower.log_end_offset, max_bytes, min_one=True)
    if s is None:
        return False
    r = follower.append_as_follower(s.read())
    assert r.last_offset + 1 == follower.log_end_offset
    return True


def catch_up(leader: PartitionLog, follower: PartitionLog) -> None:
    for _ in range(10_000):
        if not fetch(leader, follower):
            break
    assert follower.log_end_offset == leader.log_end_offset


def lead(log: PartitionLog, epoch: int, batches: list[bytes]) -> None:
    """Become leader at `epoch` (Kafka's maybeAssignEpochStartOffset), then append."""
    log.assign_leader_epoch(epoch, log.log_end_offset)
    for b in batches:
        log.append(b, epoch, NOW)


def test_follower_holds_the_leaders_bytes_and_epochs(tmp_path: Path) -> None:
    leader, follower = open_log(tmp_path / "l-0"), open_log(tmp_path / "f-0")
    for epoch in range(3):
        lead(leader, epoch, [make_batch(n) for n in (1, 2, 3, 4)])
    assert leader.log_end_offset == 30 and leader.segment_count > 1
    catch_up(leader, follower)
    assert log_bytes(tmp_path / "f-0") == log_bytes(tmp_path / "l-0")
    checkpoint = (tmp_path / "f-0" / "leader-epoch-checkpoint").read_text()
    assert checkpoint == "0\n3\n0 0\n1 10\n2 20\n"
    assert (tmp_path / "l-0" / "leader-epoch-checkpoint").read_text() == checkpoint
    assert follower.latest_epoch == leader.latest_epoch == 2
    for asked, answer in [(-1, (-1, -1)), (0, (0, 10)), (1, (1, 20)), (2, (2, 30)),
                          (7, (-1, -1))]:
        assert leader.end_offset_for_epoch(asked) == answer
        assert follower.end_offset_for_epoch(asked) == answer
    # the follower survives a restart with the same cache
    follower.close()
    again = open_log(tmp_path / "f-0", clean_shutdown=True)
    assert again.end_offset_for_epoch(1) == (1, 20)


def test_returning_follower_truncates_by_epoch_and_catches_up(tmp_path: Path) -> None:
    a, b = open_log(tmp_path / "a-0"), open_log(tmp_path / "b-0")
    lead(a, 0, [make_batch(2) for _ in range(5)])
    catch_up(a, b)
    # a leads epoch 1 and writes batches b never copies
    lead(a, 1, [make_batch(3) for _ in range(4)])
    fetch(a, b, max_bytes=1)  # b copies one batch of epoch 1 (offsets 10-12)
    assert b.log_end_offset == 13
    # a dies; b leads epoch 2 and writes on
    lead(b, 2, [make_batch(1) for _ in range(3)])
    # a comes back as follower: OffsetForLeaderEpoch(its latest epoch)
    assert a.latest_epoch == 1
    epoch, end = b.end_offset_for_epoch(a.latest_epoch)
    assert (epoch, end) == (1, 13)
    a.truncate_to(min(end, a.log_end_offset))
    assert a.log_end_offset == 13
    assert a.end_offset_for_epoch(1) == (1, 13)
    catch_up(b, a)
    assert log_bytes(tmp_path / "a-0") == log_bytes(tmp_path / "b-0")
    assert a.end_offset_for_epoch(1) == b.end_offset_for_epoch(1) == (1, 13)
    assert a.end_offset_for_epoch(2) == b.end_offset_for_epoch(2) == (2, 16)


def test_follower_state_detects_a_retried_batch_after_becoming_leader(tmp_path: Path) -> None:
    leader, follower = open_log(tmp_path / "l-0"), open_log(tmp_path / "f-0")
    batches = [make_batch(2, producer_id=42, sequence=2 * i) for i in range(4)]
    lead(leader, 0, batches)
    catch_up(leader, follower)
    assert follower.producer_count == 1
    # failover: the client never got the ack of its last batch and retries it
    follower.assign_leader_epoch(1, follower.log_end_offset)
    r = follower.append(batches[-1], 1, NOW)
    assert (r.duplicate_count, r.batch_count, r.base_offset, r.last_offset) == (1, 0, 6, 7)
    r = follower.append(batches[1], 1, NOW)
    assert (r.duplicate_count, r.base_offset, r.last_offset) == (1, 2, 3)
    assert follower.log_end_offset == 8
    r = follower.append(make_batch(1, producer_id=42, sequence=8), 1, NOW)
    assert (r.duplicate_count, r.base_offset) == (0, 8)


def test_overlap_corruption_and_empty_input(tmp_path: Path) -> None:
    leader, follower = open_log(tmp_path / "l-0"), open_log(tmp_path / "f-0")
    lead(leader, 0, [make_batch(2), make_batch(2)])
    data = leader.read(0, 1 << 20, min_one=True).read()
    r = follower.append_as_follower(memoryview(data))
    assert (r.base_offset, r.last_offset, r.batch_count, r.record_count) == (0, 3, 2, 4)
    assert (r.duplicate_count, r.log_append_time_ms) == (0, -1)
    size = follower.size_bytes
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    lead(leader, 0, [make_batch(1)])
    broken = bytearray(leader.read(4, 1 << 20, min_one=True).read())
    broken[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(bytes(broken))
    assert follower.size_bytes == size
    nothing = follower.append_as_follower(b"")
    assert (nothing.base_offset, nothing.last_offset, nothing.batch_count) == (-1, -1, 0)
    with pytest.raises(ValueError):
        follower.assign_leader_epoch(-1, 0)
    assert follower.latest_epoch == 0
    empty = open_log(tmp_path / "e-0")
    assert empty.latest_epoch is None
    assert empty.end_offset_for_epoch(0) == (-1, -1)


def test_follower_starts_over_where_the_leaders_log_starts(tmp_path: Path) -> None:
    """Retention on the leader removed what the follower lacks: the follower starts
    over at the leader's log start (Kafka's truncateFullyAndStartAt)."""
    leader = open_log(tmp_path / "l-0", log_start_offset=100)
    lead(leader, 3, [make_batch(2), make_batch(2)])
    follower = open_log(tmp_path / "f-0")
    lead(follower, 1, [make_batch(5)])
    follower.truncate_fully_and_start_at(leader.log_start_offset)
    assert (follower.log_start_offset, follower.log_end_offset) == (100, 100)
    assert follower.latest_epoch is None
    assert follower.segment_count == 1
    catch_up(leader, follower)
    assert log_bytes(tmp_path / "f-0") == log_bytes(tmp_path / "l-0")
    assert follower.end_offset_for_epoch(3) == (3, 104)
    with pytest.raises(ValueError):
        follower.truncate_fully_and_start_at(-1)


def test_many_leader_epochs_recorded_in_one_call(tmp_path: Path) -> None:
    """A broker taking over many leaderships records them in one call without the GIL
    (assign_leader_epochs): each log's checkpoint gets the epoch at its own log end,
    written to the file before the call returns, as one assign_leader_epoch each; a
    failing log is reported in its place and the others are still written."""
    from pybroker._core import StorageError, assign_leader_epochs

    logs = [open_log(tmp_path / f"t-{i}") for i in range(40)]
    for i, log in enumerate(logs):
        lead(log, 0, [make_batch(1 + i % 3)])
    ends = [log.log_end_offset for log in logs]
    logs[7].close()  # its call fails: a StorageError in its place
    errors = assign_leader_epochs(logs, [5 + i % 2 for i in range(40)], 8)
    assert len(errors) == 40
    assert isinstance(errors[7], StorageError)
    assert [i for i, e in enumerate(errors) if e is not None] == [7]
    for i, log in enumerate(logs):
        text = (tmp_path / f"t-{i}" / "leader-epoch-checkpoint").read_text()
        if i == 7:
            assert text == "0\n1\n0 0\n"
            continue
        assert text == f"0\n2\n0 0\n{5 + i % 2} {ends[i]}\n"
        assert log.latest_epoch == 5 + i % 2
        assert log.end_offset_for_epoch(0) == (0, ends[i])
    # the same epoch again changes nothing; one thread does the same work
    assert assign_leader_epochs(logs[:3], [5, 6, 5], 1) == [None, None, None]
    assert (tmp_path / "t-2" / "leader-epoch-checkpoint").read_text().endswith(
        f"5 {ends[2]}\n")
    assert not list(tmp_path.glob("*/leader-epoch-checkpoint.tmp"))
    with pytest.raises(ValueError):
        assign_leader_epochs(logs[:2], [1], 4)
    with pytest.raises(ValueError):
        assign_leader_epochs(logs[:1], [-1], 4)
    assert assign_leader_epochs([], [], 16) == []
