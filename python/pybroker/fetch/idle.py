"""Which partitions of a follower's fetch session are known to be idle, so that a fetch
round costs O(partitions that changed), not O(partitions in the session) (issue 25).

A partition of a follower's session is idle when the follower's fetch of it could only
repeat the last answer (sessions._follower_idle): it asks from the log end, and the high
watermark, last stable offset, log start, leadership and followers are as last told.
Once found idle at a round's first pass, it is watched (ReplicaPartition.watch_idle): it
stays idle until the partition itself says it changed (ReplicaPartition.changed: an
append, a high watermark moved, a truncation, a leadership or ISR change, a DeleteRecords,
a detach), until the follower names it again in a request, or until retention moved log
starts (`retention.starts_moved`, read at every round). Until then a round neither
looks at it nor records its position one by one: the follower fetched it from the log
end at every round, so its caught-up time is the session's last round (`clock_ms`), which
the partition's FollowerState reads while it is watched and takes for good when it
changes (Kafka's Replica.updateFetchState at the log end sets the caught-up time to the
fetch's time and nothing else: the high watermark cannot move on an unchanged offset).

Only in-sync followers are watched: one outside the ISR is an ISR candidate at each of
its fetches, so its partitions are looked at every round as before."""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import TYPE_CHECKING

from pybroker.log import retention

if TYPE_CHECKING:
    from pybroker.replica.partition import ReplicaPartition



def _now_ms() -> int:
    """The clock of the followers' positions (replica/partition.py's)."""
    return int(time.monotonic() * 1000)


#: a partition of a session: (topic id, partition) from v13, else (topic name, partition)
PartitionKey = tuple[Hashable, int]


class IdleWatch:
    """One follower session's idle partitions, and the keys to look at next round.

    The watch is itself the purgatory key a parked fetch of the session waits on for
    its idle partitions (one key, not one per partition): a watched partition's append
    or detach notifies it."""

    def __init__(self, follower: int, keys: list[PartitionKey]) -> None:
        self.follower = follower
        #: keys to look at next round: not idle, or not known to be (all, at first)
        self.active: dict[PartitionKey, None] = dict.fromkeys(keys)
        self._idle: dict[PartitionKey, ReplicaPartition] = {}
        self._keys: dict[ReplicaPartition, PartitionKey] = {}
        #: time.monotonic() ms of the session's last round's first pass
        self.clock_ms = 0
        #: partitions that left the idle set so far (a parked fetch compares it)
        self.moves = 0
        self._generation = retention.starts_moved

    def __len__(self) -> int:
        return len(self._idle)

    def round_started(self) -> None:
        """A new round looks at what is active; retention may have moved log starts
        since the last (rare: a segment deleted), which nothing per partition tells."""
        if self._generation != retention.starts_moved:
            self._generation = retention.starts_moved
            for key in list(self._idle):
                self.release(key)

    def fetched(self) -> None:
        """A round's first pass: every watched partition was fetched now, at its log
        end (the clock replica/partition.py's positions are in)."""
        self.clock_ms = _now_ms()

    def watch(self, key: PartitionKey, partition: ReplicaPartition) -> None:
        """`partition` was found idle at this round's first pass (and its position
        recorded): leave it out of the rounds until it changes."""
        if key not in self.active or not partition.watch_idle(self.follower, self):
            return
        del self.active[key]
        self._idle[key] = partition
        self._keys[partition] = key

    def moved(self, partition: ReplicaPartition) -> None:
        """From the partition: it changed, or was fetched another way. It is looked at
        again next round (its FollowerState took the session's clock already)."""
        key = self._keys.pop(partition, None)
        if key is not None:
            del self._idle[key]
            self.active[key] = None
            self.moves += 1

    def release(self, key: PartitionKey) -> None:
        """The follower named `key` in a request (or it is forgotten): no longer idle."""
        partition = self._idle.get(key)
        if partition is not None:
            partition.unwatch_idle(self.follower, self)  # calls moved()
        self.active[key] = None

    def forget(self, key: PartitionKey) -> None:
        self.release(key)
        del self.active[key]

    def close(self) -> None:
        """The session is gone: every watched partition goes back to plain state."""
        for key in list(self._idle):
            self.release(key)
        self.active.clear()
