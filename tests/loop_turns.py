"""For the tests of long passes that must give the event loop's other tasks a turn as
they go (server/loop_slice.LoopSlice): the pass runs beside a task that only counts its
turns, and each step of the pass notes the count it saw."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio


class Turns:
    """The counting task's turns, and the count each step of the pass saw."""

    def __init__(self) -> None:
        self.count = 0
        self.seen: list[int] = []

    def note(self) -> None:
        """Called by a step of the pass (a stand-in's method, while it holds the loop)."""
        self.seen.append(self.count)

    def run(self, body: Callable[[], Awaitable[object]]) -> None:
        """Runs `body` on a fresh event loop beside the counting task."""

        async def count() -> None:
            while True:
                self.count += 1
                await anyio.sleep(0)

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(count)
                await body()
                tg.cancel_scope.cancel()

        anyio.run(main)
