"""The leader's view of a replicated partition, on a real log: the high
watermark is the smallest log end offset over the ISR, it wakes waiters when it
moves, acks=all settles by it, and the ISR shrinks and grows by the rules."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker.config import BrokerConfig, TopicConfig
from pybroker.coordination.base import PartitionState
from pybroker.errors import ErrorCode, KafkaError
from pybroker.log.partition import Partition
from pybroker.purgatory import Purgatory
from pybroker.replica.partition import ReplicaPartition


def batch(n: int) -> memoryview:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=int(time.time() * 1000), key=b"k", value=b"v", headers=[])
    return memoryview(bytes(b.build()))


class Recorder(Purgatory):
    def __init__(self) -> None:
        super().__init__()
        self.notified: list[object] = []

    def notify(self, key: object) -> None:  # type: ignore[override]
        self.notified.append(key)
        super().notify(key)  # type: ignore[arg-type]


def leader(tmp_path: Path, isr: list[int], min_isr: int = 1) -> tuple[ReplicaPartition, Recorder]:
    log = Partition("t", 0, tmp_path / "t-0",
                    TopicConfig(BrokerConfig({}), {"min.insync.replicas": min_isr}),
                    recovery_point=0, log_start_offset=0, clean_shutdown=False)
    purgatory = Recorder()
    p = ReplicaPartition(log, 1, purgatory)
    p.make_leader(PartitionState(leader=1, leader_epoch=3, replicas=[1, 2, 3], isr=isr))
    return p, purgatory


def test_high_watermark_is_the_smallest_log_end_over_the_isr(tmp_path: Path) -> None:
    p, purgatory = leader(tmp_path, [1, 2, 3])
    p.append_as_leader(batch(5), required_acks=-1)
    assert p.log_end_offset == 5 and p.high_watermark == 0
    assert p.acks_all_status(5) is None  # still waiting for the followers
    p.record_follower_fetch(2, 5)
    assert p.high_watermark == 0  # broker 3 has nothing yet
    purgatory.notified.clear()
    p.record_follower_fetch(3, 3)
    assert p.high_watermark == 3 and p.hw_key in purgatory.notified
    p.record_follower_fetch(3, 5)
    assert p.high_watermark == 5 and p.acks_all_status(5) == ErrorCode.NONE
    # consumers read only what is committed
    assert p.read(0, 1 << 20, True) is not None


def test_a_leader_alone_commits_at_once(tmp_path: Path) -> None:
    p, _ = leader(tmp_path, [1])
    p.append_as_leader(batch(2), required_acks=-1)
    assert p.high_watermark == 2


def test_acks_all_below_min_insync_replicas(tmp_path: Path) -> None:
    p, _ = leader(tmp_path, [1], min_isr=2)
    with pytest.raises(KafkaError) as err:
        p.append_as_leader(batch(1), required_acks=-1)
    assert err.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log_end_offset == 0  # nothing appended
    p.append_as_leader(batch(1), required_acks=1)  # acks=1 is not held to it
    # the ISR shrinks below min.insync.replicas after an append: the wait ends in error
    q, _ = leader(tmp_path / "q", [1, 2], min_isr=2)
    q.append_as_leader(batch(1), required_acks=-1)
    q.isr_changed([1], version=1)
    assert q.acks_all_status(1) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_lost_leadership_fails_waiting_acks(tmp_path: Path) -> None:
    p, purgatory = leader(tmp_path, [1, 2])
    p.append_as_leader(batch(1), required_acks=-1)
    purgatory.notified.clear()
    assert p.make_follower(PartitionState(leader=2, leader_epoch=4, replicas=[1, 2, 3],
                                          isr=[2]))
    assert p.acks_all_status(1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.hw_key in purgatory.notified
    with pytest.raises(KafkaError) as err:
        p.append_as_leader(batch(1), required_acks=1)
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(KafkaError) as err:
        p.check_leader(current_leader_epoch=3)
    assert err.value.code == ErrorCode.FENCED_LEADER_EPOCH


def test_isr_shrinks_after_lag_time_and_grows_on_catch_up(tmp_path: Path) -> None:
    p, _ = leader(tmp_path, [1, 2, 3])
    p.append_as_leader(batch(4), required_acks=1)
    p.record_follower_fetch(2, 4)
    assert p.isr_to_shrink(lag_time_max_ms=60_000) is None
    # broker 3 never caught up: past the lag time it is out, broker 2 stays
    p.followers[3].last_caught_up_ms -= 61_000
    assert p.isr_to_shrink(lag_time_max_ms=60_000) == [1, 2]
    p.isr_changed([1, 2], version=1)
    assert p.high_watermark == 4  # the ISR that is left has everything
    assert p.isr_to_expand(alive={1, 2, 3}) is None  # 3 is still behind the high watermark
    p.record_follower_fetch(3, 4)
    assert p.isr_to_expand(alive={1, 2, 3}) == [1, 2, 3]


def test_only_a_live_follower_joins_the_isr(tmp_path: Path) -> None:
    """A follower whose session expired may still fetch (it cannot know it is
    fenced): caught up or not, it does not join until it is registered again."""
    p, _ = leader(tmp_path, [1, 2])
    p.append_as_leader(batch(2), required_acks=1)
    p.record_follower_fetch(2, 2)
    p.record_follower_fetch(3, 2)
    assert p.isr_to_expand(alive={1, 2}) is None
    assert p.isr_to_expand(alive=set()) is None  # nobody known alive: nobody joins
    assert p.isr_to_expand(alive={1, 2, 3}) == [1, 2, 3]


def test_a_follower_that_keeps_up_under_steady_produce_stays_in_the_isr(
        tmp_path: Path) -> None:
    p, _ = leader(tmp_path, [1, 2])
    p.append_as_leader(batch(2), required_acks=1)
    p.record_follower_fetch(2, 0)  # the leader's end is 2 at this fetch
    p.append_as_leader(batch(2), required_acks=1)
    # the next fetch has everything the leader had at the previous one, though the
    # leader has moved on again: caught up as of the previous fetch
    follower = p.followers[2]
    follower.last_caught_up_ms, follower.last_fetch_ms = 0, 12_345  # long ago, both
    p.record_follower_fetch(2, 2)
    assert follower.last_caught_up_ms == 12_345
    # a follower that falls behind what the leader had is not caught up
    p.followers[2].last_caught_up_ms -= 61_000
    p.append_as_leader(batch(2), required_acks=1)
    p.record_follower_fetch(2, 2)  # the leader had 4 at the previous fetch
    assert p.isr_to_shrink(lag_time_max_ms=60_000) == [1]


def test_a_joining_follower_holds_the_high_watermark_while_its_isr_write_is_out(
        tmp_path: Path) -> None:
    """Once the expansion is written the controller may elect the joining follower, so
    from the moment the write goes out nothing it lacks may be acknowledged (Kafka's
    maximal ISR, KIP-497); the ISR used for acks=all grows only once it is stored."""
    p, _ = leader(tmp_path, [1, 2])
    p.append_as_leader(batch(2), required_acks=-1)
    p.record_follower_fetch(2, 2)
    p.record_follower_fetch(3, 2)
    assert p.high_watermark == 2
    joined = p.isr_to_expand({1, 2, 3})
    assert joined == [1, 2, 3]
    p.pending_isr = joined  # the ISR manager's write is on its way
    p.append_as_leader(batch(3), required_acks=-1)
    p.record_follower_fetch(2, 5)
    assert p.high_watermark == 2, "acknowledged what the joining follower lacks"
    p.record_follower_fetch(3, 5)
    assert p.high_watermark == 5
    p.isr_changed(joined, version=7)
    assert p.isr == [1, 2, 3] and p.pending_isr == []


def test_the_same_state_taken_again_keeps_an_expansion_being_written(tmp_path: Path) -> None:
    """A state the leader already holds, applied again (its topic re-applied whole, a new
    store session), says nothing of the expansion written on it: the write may still
    succeed, so the joining follower keeps holding the high watermark back. A state of
    another version ends the wait (the write lost the race, or it is in)."""
    p, _ = leader(tmp_path, [1, 2])
    state = PartitionState(leader=1, leader_epoch=3, replicas=[1, 2, 3], isr=[1, 2])
    p.make_leader(state, version=6)
    p.append_as_leader(batch(2), required_acks=-1)
    p.record_follower_fetch(2, 2)
    p.record_follower_fetch(3, 2)
    p.pending_isr = p.isr_to_expand({1, 2, 3}) or []
    assert p.pending_isr == [1, 2, 3]
    p.make_leader(state, version=6)  # the same state, again
    assert p.pending_isr == [1, 2, 3]
    p.append_as_leader(batch(3), required_acks=-1)
    p.record_follower_fetch(2, 5)
    assert p.high_watermark == 2, "acknowledged what the joining follower lacks"
    p.make_leader(state, version=7)  # another version: the write's outcome is known
    assert p.pending_isr == []
    assert p.high_watermark == 5


def test_a_fetch_offset_past_the_log_end_is_no_progress(tmp_path: Path) -> None:
    """A follower cannot have more than the leader: such an offset (a confused or forged
    replica fetch) must not move the high watermark over records nobody else has."""
    p, _ = leader(tmp_path, [1, 2])
    p.append_as_leader(batch(4), required_acks=-1)
    p.record_follower_fetch(2, 1000)
    assert p.high_watermark == 0
    assert p.followers[2].log_end_offset == -1  # as before the fetch: unknown
    p.record_follower_fetch(2, 4)
    assert p.high_watermark == 4


def test_an_isr_member_the_leader_has_no_state_for_holds_the_high_watermark(
        tmp_path: Path) -> None:
    """Fail closed: an ISR that names a broker this leader knows nothing of (not among
    the replicas it tracks) acknowledges nothing, however far the others have got."""
    log = Partition("t", 0, tmp_path / "t-0",
                    TopicConfig(BrokerConfig({}), {"min.insync.replicas": 1}),
                    recovery_point=0, log_start_offset=0, clean_shutdown=False)
    p = ReplicaPartition(log, 1, Purgatory())
    p.make_leader(PartitionState(leader=1, leader_epoch=3, replicas=[1, 2], isr=[1, 2, 4]))
    p.append_as_leader(batch(3), required_acks=-1)
    p.record_follower_fetch(2, 3)
    assert p.high_watermark == 0


def test_a_follower_the_controller_took_out_rejoins_only_by_fetching_again(
        tmp_path: Path) -> None:
    """The controller takes a dead follower out of the ISR (same leader epoch); what it
    fetched before it died must not bring it straight back in."""
    p, _ = leader(tmp_path, [1, 2, 3])
    p.append_as_leader(batch(2), required_acks=-1)
    p.record_follower_fetch(2, 2)
    p.record_follower_fetch(3, 2)
    assert p.high_watermark == 2
    p.make_leader(PartitionState(leader=1, leader_epoch=3, replicas=[1, 2, 3], isr=[1, 2]))
    assert p.isr == [1, 2]
    assert p.isr_to_expand({1, 2, 3}) is None, "a follower that has not fetched since rejoined"
    p.record_follower_fetch(3, 2)  # alive after all: it fetches, and joins
    assert p.isr_to_expand({1, 2, 3}) == [1, 2, 3]


class CountingLog:
    """A partition's Rust log with its read calls counted (everything else passes)."""

    def __init__(self, log: object) -> None:
        self._log = log
        self.reads = 0

    def read(self, *args: object, **kw: object) -> object:
        self.reads += 1
        return self._log.read(*args, **kw)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._log, name)


@pytest.mark.parametrize("committed_only,read_committed", [
    (False, False), (True, False), (True, True)])
def test_nothing_new_is_answered_without_calling_into_the_log(
        tmp_path: Path, committed_only: bool, read_committed: bool) -> None:
    """A read at the end of what may be read (a follower at the log end, a consumer at
    the high watermark or last stable offset) returns no records without the log's
    read, which releases and retakes the GIL once per partition of a fetch (issue 25);
    any other read, out of range included, is the log's, as before."""
    p, _ = leader(tmp_path, [1, 2])
    p.append_as_leader(batch(3), required_acks=1)
    p.append_as_leader(batch(2), required_acks=1)
    p.record_follower_fetch(2, 3)  # high watermark 3, log end 5
    counting = CountingLog(p.log.log)
    p.log.log = counting  # type: ignore[assignment]
    end = 5 if not committed_only else 3

    def read(offset: int) -> object:
        return p.read(offset, 1 << 20, True, committed_only=committed_only,
                      read_committed=read_committed)

    assert read(end) is None
    assert counting.reads == 0
    records = read(0)
    assert records is not None and len(records) > 0 and counting.reads == 1
    if committed_only:  # between the high watermark and the log end: nothing, from the log
        assert read(4) is None and counting.reads == 2
    with pytest.raises(Exception, match="(?i)out of range"):
        read(6)
    p.log.log.advance_log_start_offset(2)  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="(?i)out of range"):
        read(1)
