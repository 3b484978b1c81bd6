"""Replication throttles (KIP-73): while partitions move, the bytes replicated
for the replicas a topic names in `leader.replication.throttled.replicas` /
`follower.replication.throttled.replicas` ("partition:broker,..." or "*") are
bounded by the broker's `leader.replication.throttled.rate` /
`follower.replication.throttled.rate` (bytes/s). Only replicas out of the ISR
are throttled, so acks=all produce to in-sync replicas never waits on a
throttle (Kafka's shouldFollowerThrottle / shouldLeaderThrottle).

The rate is measured over a sliding window of whole seconds, as Kafka's
ReplicationQuotaManager does (replication.quota.window.num 11 samples of 1 s);
when the measured rate is above the bound, throttled partitions are left out of
fetches until it falls again."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

#: Kafka's replication.quota.window.num and replication.quota.window.size.seconds
WINDOWS = 11
WINDOW_S = 1.0


def throttled(value: Any, partition: int, broker_id: int) -> bool:
    """Whether a throttled-replicas config value names this partition's replica on
    `broker_id` (a list of "p:b" entries, "*", or the same as one string)."""
    items = value if isinstance(value, list) else [
        v.strip() for v in str(value or "").split(",") if v.strip()]
    return "*" in items or f"{partition}:{broker_id}" in items


class ReplicationQuota:
    """Bytes/s of throttled replication traffic in one direction on this broker."""

    def __init__(self, rate_limit: Callable[[], int],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rate_limit = rate_limit
        self._clock = clock
        #: (window start, bytes) of the recent windows, oldest first
        self._samples: collections.deque[list[float]] = collections.deque()

    @property
    def limit(self) -> int:
        return int(self._rate_limit())

    def record(self, nbytes: int) -> None:
        now = self._clock()
        start = now - now % WINDOW_S
        if self._samples and self._samples[-1][0] == start:
            self._samples[-1][1] += nbytes
        else:
            self._samples.append([start, float(nbytes)])
        self._expire(now)

    def rate(self) -> float:
        """Bytes/s over the windows kept (at least one window's time)."""
        now = self._clock()
        self._expire(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0][0], WINDOW_S)
        return sum(s[1] for s in self._samples) / elapsed

    def exceeded(self) -> bool:
        # nothing throttled in the windows kept (every fetch round of a broker that moves
        # no partitions): a rate of 0 exceeds no limit (at least 0), so the dynamic
        # config's layers are not looked up
        rate = self.rate()
        return rate > 0.0 and rate > self.limit

    def _expire(self, now: float) -> None:
        while self._samples and self._samples[0][0] <= now - WINDOWS * WINDOW_S:
            self._samples.popleft()
