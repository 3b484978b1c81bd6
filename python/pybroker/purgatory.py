"""The purgatory: requests that must wait park here until what they wait for
happens or their time runs out (Kafka's DelayedOperationPurgatory).

One mechanism serves every kind of delayed request: a long-poll fetch waits for
a partition's high watermark to move (or, for a follower, its log end), an
acks=all produce waits for the high watermark to pass its records. Each waiter
watches a set of keys; whoever changes what a key stands for calls `notify`,
and the waiter re-checks its own condition. Waking is cheap and spurious
wake-ups are allowed, so a notifier never has to know who waits or why."""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import time
from collections.abc import Callable, Hashable, Iterable

#: a waiter whose deadline is this close when the timer fires is timed out with the
#: others: uvloop's timers have millisecond resolution, and a wait asked for in whole
#: ms (max_wait_ms, timeout_ms) ending up to 1 ms early changes nothing
EXPIRY_SLACK_S = 0.001
#: the deadline entries kept, past which those of waits already over are dropped:
#: this many per parked wait, plus COMPACT_MIN
COMPACT_FACTOR = 2
COMPACT_MIN = 1024


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future[bool]]] = {}
        #: requests waiting now, by kind ("fetch", "produce"): the purgatory size metric
        self.waiting: collections.Counter[str] = collections.Counter()
        #: every wait's (deadline in loop time, sequence, future), earliest first; a
        #: future woken or cancelled stays until it reaches the head (see _fire)
        self._deadlines: list[tuple[float, int, asyncio.Future[bool]]] = []
        self._sequence = itertools.count()
        #: waits parked now, counted or not (bounds the done entries kept, see _expire_at)
        self._parked = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        #: loop time the timer is armed for
        self._timer_at = 0.0

    async def wait_until(
        self,
        kind: str,
        keys: Iterable[Hashable],
        ready: Callable[[], bool],
        deadline: float,
        *,
        counted: bool = True,
    ) -> bool:
        """Wait until `ready()` holds, re-checking it whenever one of `keys` is
        notified, or until `deadline` (time.monotonic()). True when ready. Not
        `counted`: as wait_for_notify's."""
        keys = list(keys)
        while not ready():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await self.wait_for_notify(kind, keys, remaining, counted=counted)
        return True

    async def wait_for_notify(self, kind: str, keys: list[Hashable], timeout_s: float, *,
                              counted: bool = True) -> bool:
        """Park until one of `keys` is notified or `timeout_s` passes (False). Not
        `counted` in `waiting`: the caller counts the requests it waits for.

        A bare future: a consumer at 20k records/s parks and is woken thousands of
        times a second, and anyio's Event plus a cancel scope with a deadline cost
        several times more per wait (issue 18). The deadlines share one loop timer,
        armed for the earliest wait still parked: a loop timer per wait was made and
        cancelled for every parked fetch and acks=all produce (three a record at
        5,000 acks=all records/s, RF 3), and almost none of them runs out (issue 26).
        Cancelling the task (the client left, the broker stops) still ends the wait
        at once."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[bool] = loop.create_future()
        for key in keys:
            self._watchers.setdefault(key, set()).add(woken)
        if counted:
            self.waiting[kind] += 1
        self._expire_at(loop, loop.time() + timeout_s, woken)
        self._parked += 1
        try:
            return await woken
        finally:
            # also on cancellation (the client left): nothing stays registered but the
            # deadline entry of a done future, which the timer or a compaction drops
            self._parked -= 1
            if counted:
                self.waiting[kind] -= 1
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(woken)
                    if not watchers:
                        del self._watchers[key]

    def notify(self, key: Hashable) -> None:
        watchers = self._watchers.pop(key, None)
        if watchers:
            for woken in watchers:
                if not woken.done():
                    woken.set_result(True)

    @property
    def size(self) -> int:
        return sum(self.waiting.values())

    def _expire_at(self, loop: asyncio.AbstractEventLoop, when: float,
                   woken: asyncio.Future[bool]) -> None:
        if loop is not self._loop:
            # a new loop (tests run several): the old one's waits and timer are gone
            self._loop, self._timer, self._deadlines = loop, None, []
        deadlines = self._deadlines
        if len(deadlines) > COMPACT_FACTOR * self._parked + COMPACT_MIN:
            # the entries of waits already over, kept until they reach the head, would
            # pile up behind a long one (an acks=all produce's 30 s): dropped in one
            # pass, at most once per COMPACT_MIN waits
            deadlines[:] = [entry for entry in deadlines if not entry[2].done()]
            heapq.heapify(deadlines)
        heapq.heappush(deadlines, (when, next(self._sequence), woken))
        timer = self._timer
        if timer is None or when < self._timer_at:
            # none armed, or armed for later than this wait may last
            if timer is not None:
                timer.cancel()
            self._arm(loop, when)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        self._timer_at = when
        self._timer = loop.call_at(when, self._fire)

    def _fire(self) -> None:
        """Time out the waits whose deadline has come, drop the entries of waits
        already over (woken or cancelled), and arm for the earliest wait still parked:
        the timer fires about once per parked wait's whole timeout, not once a wait."""
        self._timer = None
        loop = self._loop
        assert loop is not None
        deadlines = self._deadlines
        now = loop.time() + EXPIRY_SLACK_S
        while deadlines:
            when, _, woken = deadlines[0]
            if not woken.done():
                if when > now:
                    self._arm(loop, when)
                    return
                woken.set_result(False)
            heapq.heappop(deadlines)
