"""One partition as this broker holds it: the local log plus what replication
knows about it — the leader, the leader epoch, the replicas, the ISR and, on the
leader, each follower's log end offset.

The high watermark is where the leader says records are committed: the smallest
log end offset over the ISR (Kafka's Partition.maybeIncrementLeaderHW). On a
single node the ISR is the leader alone, so it follows the log end offset at
once; with followers it moves as they fetch. Whenever it moves, waiters in the
purgatory keyed by `hw_key` (long-poll fetches, acks=all produces) re-check."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Container, Hashable
from typing import TYPE_CHECKING

from pybroker._core import AppendResult, FileSlice
from pybroker.coordination.base import PartitionState
from pybroker.errors import ErrorCode, KafkaError
from pybroker.log.partition import Partition
from pybroker.purgatory import Purgatory

if TYPE_CHECKING:
    from pybroker.fetch.idle import IdleWatch


def hw_key(topic: str, index: int) -> Hashable:
    """The purgatory key notified when the partition's high watermark moves."""
    return ("hw", topic, index)


def leo_key(topic: str, index: int) -> Hashable:
    """The purgatory key notified when the leader's log end offset moves
    (what followers' fetches wait for)."""
    return ("leo", topic, index)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclasses.dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica)."""

    log_end_offset: int = -1
    #: when it last was caught up (the ISR shrink clock, see record_follower_fetch)
    last_caught_up_ms: int = 0
    #: the previous fetch: when, and the leader's log end offset at that moment
    last_fetch_ms: int = 0
    last_fetch_leader_end: int = -1
    #: the follower's fetch session watching this partition as idle (fetch/idle.py):
    #: while set, the follower fetches it from the log end at each of the session's
    #: rounds, the last at `idle.clock_ms`
    idle: IdleWatch | None = dataclasses.field(default=None, repr=False, compare=False)

    def caught_up_ms(self) -> int:
        """When it last was caught up, counting the rounds of a session watching it."""
        idle = self.idle
        return self.last_caught_up_ms if idle is None else max(self.last_caught_up_ms,
                                                                idle.clock_ms)

    def settle(self) -> None:
        """No longer watched: take the watching session's rounds for good (each was a
        fetch from the log end, as record_follower_fetch would have noted it)."""
        idle = self.idle
        if idle is not None:
            self.idle = None
            self.last_caught_up_ms = max(self.last_caught_up_ms, idle.clock_ms)
            self.last_fetch_ms = max(self.last_fetch_ms, idle.clock_ms)


class ReplicaPartition:
    def __init__(self, log: Partition, broker_id: int, purgatory: Purgatory,
                 on_isr_candidate: Callable[[ReplicaPartition], None] | None = None
                 ) -> None:
        self.log = log
        self.topic = log.topic
        self.index = log.index
        self.broker_id = broker_id
        self.purgatory = purgatory
        self.leader = -1
        self.leader_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        #: an ISR expansion being written: until the write is answered, the high
        #: watermark waits for the joining follower too (Kafka's maximal ISR, KIP-497):
        #: the store may already name it, and an election may pick it
        self.pending_isr: list[int] = []
        self.followers: dict[int, FollowerState] = {}
        #: the coordination store's version of the state this broker last took, so an
        #: ISR change is a conditional write on it (a stale leader's write fails)
        self.state_version = -1
        #: where this broker's current leadership began (a follower must have
        #: reached it to join the ISR: it then holds nothing of an older epoch)
        self.epoch_start_offset = 0
        self._hw_key = hw_key(self.topic, self.index)
        self._leo_key = leo_key(self.topic, self.index)
        self._on_isr_candidate = on_isr_candidate

    # --- role ---------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    def make_leader(self, state: PartitionState, version: int = -1) -> bool:
        """Take the leadership the controller gave this broker (LeaderAndIsr).
        True when this is a new leader epoch (not just an ISR change)."""
        self.changed()
        now = _now_ms()
        new_epoch = not self.is_leader or state.leader_epoch != self.leader_epoch
        previous = {} if new_epoch else self.followers
        # a follower the controller took out of the ISR (found dead, or shutting down)
        # joins again only through a fetch made since: what it fetched before must not
        # bring a dead broker straight back in (Kafka expands the ISR on a fetch only)
        removed = set() if new_epoch else set(self.isr) - set(state.isr)
        self._take(state, version)
        if new_epoch:
            # the epoch starts at our log end: a returning replica truncates to it. Most
            # often recorded already, off the loop (ReplicaManager's _LeadAt): no call
            # then (a no-op, since every entry starts at or below the log end, but one
            # that lets the GIL go and waits to get it back, once per partition: seconds
            # over a thousand takeovers while other threads are busy, issue 25)
            if self.log.log.latest_epoch != state.leader_epoch:
                self.log.log.assign_leader_epoch(state.leader_epoch, self.log_end_offset)
            self.epoch_start_offset = self.log_end_offset
        self.followers = {
            b: (FollowerState(last_caught_up_ms=now) if b in removed
                else previous.get(b, FollowerState(last_caught_up_ms=now)))
            for b in state.replicas if b != self.broker_id
        }
        self._maybe_increment_high_watermark()
        return new_epoch

    def make_follower(self, state: PartitionState, version: int = -1) -> bool:
        """Follow the leader the controller named. True when the leader or epoch
        changed, so the fetcher must truncate (by leader epoch) and restart."""
        self.changed()
        changed = state.leader != self.leader or state.leader_epoch != self.leader_epoch
        self._take(state, version)
        self.followers = {}
        if changed:
            self.purgatory.notify(self._hw_key)  # waiting acks=all produces fail now
        return changed

    def _take(self, state: PartitionState, version: int) -> None:
        # the state this broker already holds, taken again (a whole topic re-applied,
        # a new store session): an expansion written on it may still succeed, so the
        # joining follower keeps holding the high watermark back until the write is
        # answered or a state of another version arrives
        same = (version >= 0 and version == self.state_version
                and state.leader == self.leader and state.leader_epoch == self.leader_epoch
                and list(state.isr) == self.isr)
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        if not same:
            self.pending_isr = []
        self.state_version = version

    # --- the log, as the outside world sees it --------------------------------------
    @property
    def config(self):  # type: ignore[no-untyped-def]  # the topic's TopicConfig
        return self.log.config

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log.log_end_offset

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise the error Kafka gives a client that asked a replica which is not
        (or no longer, or not yet) the leader at the epoch it knows."""
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH
                             if current_leader_epoch < self.leader_epoch
                             else ErrorCode.UNKNOWN_LEADER_EPOCH)
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"This broker is not the leader of {self.topic}-{self.index}")

    def check_replica(self, current_leader_epoch: int = -1) -> None:
        """As check_leader, for a read any replica may serve (a consumer fetching
        from a follower): the epochs must match and the replica follow a leader."""
        if self.is_leader:
            self.check_leader(current_leader_epoch)
            return
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH
                             if current_leader_epoch < self.leader_epoch
                             else ErrorCode.UNKNOWN_LEADER_EPOCH)
        if self.leader < 0:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"{self.topic}-{self.index} has no leader this broker knows of")

    # --- leader writes and reads ----------------------------------------------------
    def append_as_leader(self, records: memoryview, required_acks: int) -> AppendResult:
        """Append a producer's batches. acks=all is refused up front when the ISR is
        smaller than min.insync.replicas (NOT_ENOUGH_REPLICAS), as Kafka does."""
        self.check_leader()
        if required_acks == -1 and len(self.isr) < self.log.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {self.isr} is insufficient to satisfy the "
                f"min.isr requirement of {self.log.min_insync_replicas} for partition "
                f"{self.topic}-{self.index}")
        result = self.log.append(records, self.leader_epoch)
        self.purgatory.notify(self._leo_key)
        self.changed(wake=True)
        self._maybe_increment_high_watermark()
        return result

    def append_marker_as_leader(self, *, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int, commit: bool) -> AppendResult:
        """Append a transaction marker (WriteTxnMarkers, see transaction/markers.py).
        Markers are written with acks=all, so the ISR must meet min.insync.replicas."""
        self.check_leader()
        if len(self.isr) < self.log.min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS)
        result = self.log.append_marker(producer_id, producer_epoch, coordinator_epoch,
                                        commit, self.leader_epoch)
        self.purgatory.notify(self._leo_key)
        self.changed(wake=True)
        self._maybe_increment_high_watermark()
        return result

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: the high watermark, or
        the first offset of a transaction not yet ended (or whose marker the ISR
        does not have yet) when that is lower (Kafka's LSO)."""
        return self.log.last_stable_offset

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions with data in
        [start, end), for a read_committed fetch."""
        return self.log.log.aborted_transactions(start, end)

    # --- the leader's view of its followers (Kafka's Partition.updateFollowerFetchState)
    def record_follower_fetch(self, broker_id: int, fetch_offset: int) -> None:
        """A follower fetched from `fetch_offset`: it has everything below it. An
        offset past our log end is no progress (the fetch is out of range, as in
        Kafka, which updates a follower only after a read): it must not move the high
        watermark over records the follower does not have.

        Once per partition of every follower fetch: the log end is asked of the log
        once and handed to the high watermark's computation (issue 26)."""
        follower = self.followers.get(broker_id)
        if follower is None:
            return
        if follower.idle is not None:  # fetched other than by the session watching it
            follower.idle.moved(self)
            follower.settle()
        leader_end = self.log.log.log_end_offset
        if fetch_offset > leader_end:
            return
        now = _now_ms()
        follower.log_end_offset = fetch_offset
        # Kafka's Replica.updateFetchState: caught up now if it asks from our log end;
        # else caught up as of its previous fetch if it now has everything we had
        # then — under steady produce a follower is never exactly at the end, yet
        # keeps up and must stay in the ISR
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = now
        elif fetch_offset >= follower.last_fetch_leader_end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms,
                                             follower.last_fetch_ms)
        follower.last_fetch_ms = now
        follower.last_fetch_leader_end = leader_end
        self._maybe_increment_high_watermark(leader_end)
        if (broker_id not in self.isr and fetch_offset >= self.log.high_watermark
                and self._on_isr_candidate is not None):
            self._on_isr_candidate(self)

    def isr_to_expand(self, alive: Container[int]) -> list[int] | None:
        """The ISR with a caught-up follower added (one whose log end reached the
        high watermark), or None when no follower qualifies. Only a follower that is
        `alive` (registered, so with a live session) may join: one whose session
        expired may still fetch, unaware it is fenced, and the controller has just
        taken it out of the ISR (Kafka's isReplicaIsrEligible, KIP-841). There is no
        'anyone' default: a caller that does not know who is alive admits nobody."""
        if not self.is_leader:
            return None
        joining = [b for b, f in self.followers.items()
                   if b not in self.isr and b in alive
                   and f.log_end_offset >= self.high_watermark
                   and f.log_end_offset >= self.epoch_start_offset]
        return sorted(set(self.isr) | set(joining)) if joining else None

    def isr_to_shrink(self, lag_time_max_ms: int) -> list[int] | None:
        """The ISR without followers that have not caught up for lag_time_max_ms,
        or None when every ISR member keeps up."""
        if not self.is_leader:
            return None
        now = _now_ms()
        lagging = [b for b in self.isr if b != self.broker_id
                   and now - self.followers.get(b, FollowerState()).caught_up_ms()
                   > lag_time_max_ms]
        return [b for b in self.isr if b not in lagging] if lagging else None

    def isr_changed(self, isr: list[int], version: int) -> None:
        """The leader's own ISR change was written (at store version `version`)."""
        self.changed()
        self.isr = list(isr)
        self.pending_isr = []
        self.state_version = version
        self._maybe_increment_high_watermark()
        self.purgatory.notify(self._hw_key)

    # --- follower side ----------------------------------------------------------------
    def append_as_follower(self, records: memoryview, leader_high_watermark: int) -> int:
        """Append batches fetched from the leader, keeping its offsets; the high
        watermark follows the leader's, up to what this replica has. Returns the
        records appended."""
        result = self.log.append_as_follower(records)
        self.update_follower_high_watermark(leader_high_watermark)
        return int(result.record_count)

    def appended_as_follower(self, leader_high_watermark: int) -> None:
        """The fetcher appended the leader's batches to the log itself (one Rust call
        per Fetch response, _core.apply_fetch_response): the flush policy and the
        high watermark follow, as after append_as_follower."""
        self.log.maybe_flush()
        self.update_follower_high_watermark(leader_high_watermark)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        target = min(leader_high_watermark, self.log_end_offset)
        if target != self.high_watermark:
            self.log.update_high_watermark(target)
            self.purgatory.notify(self._hw_key)

    def clear_pending_isr(self) -> None:
        """The ISR expansion being written did not happen: the joining follower no
        longer holds the high watermark back, which may move now (not at the next
        fetch of a partition: an idle one is not recorded at each round, issue 25)."""
        self.pending_isr = []
        self._maybe_increment_high_watermark()

    def truncate_to(self, offset: int) -> None:
        self.changed()
        self.log.log.truncate_to(offset)
        self.log.update_high_watermark(min(self.high_watermark, self.log_end_offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.changed()
        self.log.log.truncate_fully_and_start_at(offset)
        self.log.update_high_watermark(offset)

    def follow_log_start_offset(self, leader_log_start_offset: int) -> None:
        """The leader's log start moved (retention, DeleteRecords): ours follows, as
        far as we have records (Kafka's maybeIncrementLogStartOffset)."""
        target = min(leader_log_start_offset, self.log_end_offset)
        if target > self.log_start_offset:
            self.log.log.advance_log_start_offset(target)

    def read(self, offset: int, max_bytes: int, min_one: bool,
             committed_only: bool = True, read_committed: bool = False) -> FileSlice | None:
        """Batches from `offset`: for a consumer only committed ones (below the
        high watermark; with read_committed below the last stable offset), for a
        follower everything up to the log end.

        Nothing new (offset at the end of what may be read: most partitions of a
        follower's fetch, or of a caught-up consumer's) is answered here, as the log
        would answer it (no records), without calling into the log: that call releases
        the GIL and takes it back, and a fetch over thousands of partitions then waits
        behind any other busy thread once per partition (seconds of event-loop stall
        on a loaded machine, issue 25). Anything else, an offset out of range
        included, goes to the log."""
        log = self.log.log
        end = log.log_end_offset
        upper = end if not committed_only else min(
            end, self.last_stable_offset if read_committed else self.high_watermark)
        if offset == upper and offset >= log.log_start_offset and not self.log.closed:
            return None
        if read_committed:
            return self.log.log.read(offset, max_bytes, min_one=min_one,
                                     max_offset=self.last_stable_offset)
        if committed_only:
            return self.log.read(offset, max_bytes, min_one)
        return self.log.log.read(offset, max_bytes, min_one=min_one)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        return self.log.log.offset_for_timestamp(timestamp_ms)

    # --- acks=all -------------------------------------------------------------------
    def acks_all_status(self, required_offset: int) -> ErrorCode | None:
        """Where an acks=all append of records below `required_offset` stands: NONE
        once the high watermark passed them; NOT_ENOUGH_REPLICAS_AFTER_APPEND when
        it did but the ISR shrank below min.insync.replicas meanwhile; NOT_LEADER
        when leadership was lost; None while still waiting."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset:
            if len(self.isr) < self.log.min_insync_replicas:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return ErrorCode.NONE
        return None

    def _maybe_increment_high_watermark(self, log_end_offset: int | None = None) -> None:
        """HW = min log end offset over the ISR (and an ISR expansion being written);
        it never goes back on a leader. `log_end_offset` is the log's, when the caller
        has just read it.

        Run at every append and every follower fetch of a partition: a plain walk of
        the two short lists, no sets built (issue 26)."""
        if self.leader != self.broker_id:
            return
        end = self.log.log.log_end_offset if log_end_offset is None else log_end_offset
        followers = self.followers
        me = self.broker_id
        for members in (self.isr, self.pending_isr):
            for broker in members:
                if broker != me:
                    follower = followers.get(broker)
                    if follower is None:
                        return  # an ISR member this leader knows nothing of: no progress
                    if follower.log_end_offset < end:
                        end = follower.log_end_offset
        if end > self.log.high_watermark:
            self.log.update_high_watermark(end)
            self.purgatory.notify(self._hw_key)
            self.changed()

    @property
    def hw_key(self) -> Hashable:
        return self._hw_key

    @property
    def leo_key(self) -> Hashable:
        return self._leo_key

    def detach(self) -> None:
        """This broker no longer holds the partition: waiters re-check and find it gone."""
        self.changed(wake=True)
        self.leader = -1
        self.purgatory.notify(self._hw_key)
        self.purgatory.notify(self._leo_key)

    # --- follower sessions watching this partition as idle (fetch/idle.py) ------------
    def watch_idle(self, broker_id: int, idle: IdleWatch) -> bool:
        """A follower's session found the partition idle at a round's first pass (its
        position just recorded): it leaves it out of its rounds until `changed`. Only
        an in-sync follower's: one outside the ISR is an ISR candidate at each fetch."""
        follower = self.followers.get(broker_id)
        if follower is None or broker_id not in self.isr or not self.is_leader:
            return False
        if follower.idle is not None and follower.idle is not idle:
            follower.idle.moved(self)  # an older session of the same follower
            follower.settle()
        follower.idle = idle
        return True

    def unwatch_idle(self, broker_id: int, idle: IdleWatch) -> None:
        follower = self.followers.get(broker_id)
        if follower is not None and follower.idle is idle:
            follower.settle()
        idle.moved(self)

    def changed(self, wake: bool = False) -> None:
        """What a follower's fetch answer depends on may have moved (the log end, the
        high watermark, the log start, the leadership, the ISR or the followers): the
        sessions watching it as idle look at it again; `wake` (the log end moved or
        the partition is gone) also wakes their parked fetches, as `leo_key` does.
        Called before the change is made to `followers`, so no watch is lost."""
        for follower in self.followers.values():
            idle = follower.idle
            if idle is not None:
                follower.settle()
                idle.moved(self)
                if wake:
                    self.purgatory.notify(idle)
