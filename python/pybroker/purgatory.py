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
import time
from collections.abc import Callable, Hashable, Iterable


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future[bool]]] = {}
        #: requests waiting now, by kind ("fetch", "produce"): the purgatory size metric
        self.waiting: collections.Counter[str] = collections.Counter()

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

        A bare future and one loop timer: a consumer at 20k records/s parks and is
        woken thousands of times a second, and anyio's Event plus a cancel scope with
        a deadline cost several times more per wait (issue 18). Cancelling the task
        (the client left, the broker stops) still ends the wait at once."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[bool] = loop.create_future()
        for key in keys:
            self._watchers.setdefault(key, set()).add(woken)
        if counted:
            self.waiting[kind] += 1
        timer = loop.call_later(timeout_s, _expire, woken)
        try:
            return await woken
        finally:
            # also on cancellation (the client left): nothing stays registered
            timer.cancel()
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


def _expire(woken: asyncio.Future[bool]) -> None:
    if not woken.done():
        woken.set_result(False)
