"""The purgatory: requests that must wait park here until what they wait for
happens or their time runs out (Kafka's DelayedOperationPurgatory).

One mechanism serves every kind of delayed request: a long-poll fetch waits for
a partition's high watermark to move (or, for a follower, its log end), an
acks=all produce waits for the high watermark to pass its records. Each waiter
watches a set of keys; whoever changes what a key stands for calls `notify`,
and the waiter re-checks its own condition. Waking is cheap and spurious
wake-ups are allowed, so a notifier never has to know who waits or why."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Hashable, Iterable

import anyio


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[anyio.Event]] = {}
        #: requests waiting now, by kind ("fetch", "produce"): the purgatory size metric
        self.waiting: collections.Counter[str] = collections.Counter()

    async def wait_until(
        self,
        kind: str,
        keys: Iterable[Hashable],
        ready: Callable[[], bool],
        deadline: float,
    ) -> bool:
        """Wait until `ready()` holds, re-checking it whenever one of `keys` is
        notified, or until `deadline` (time.monotonic()). True when ready."""
        keys = list(keys)
        while not ready():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await self.wait_for_notify(kind, keys, remaining)
        return True

    async def wait_for_notify(self, kind: str, keys: list[Hashable], timeout_s: float) -> bool:
        """Park until one of `keys` is notified or `timeout_s` passes (False)."""
        event = anyio.Event()
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)
        self.waiting[kind] += 1
        try:
            with anyio.move_on_after(timeout_s):
                await event.wait()
            return event.is_set()
        finally:
            # also on cancellation (the client left): nothing stays registered
            self.waiting[kind] -= 1
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(event)
                    if not watchers:
                        del self._watchers[key]

    def notify(self, key: Hashable) -> None:
        watchers = self._watchers.pop(key, None)
        if watchers:
            for event in watchers:
                event.set()

    @property
    def size(self) -> int:
        return sum(self.waiting.values())
