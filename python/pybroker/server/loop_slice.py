"""Long passes on the event loop, cut into slices: a loop over every partition (an ISR
round, a batch of partition states) holds every request, fetch and watch up for as
long as it runs, which at thousands of partitions on a loaded machine is hundreds of
ms (issue 25). `LoopSlice` lets other tasks in whenever a slice's time has gone; what
the pass looks at after a pause may have changed meanwhile, which each caller checks
as it would for a state arriving a moment later."""

from __future__ import annotations

import time

import anyio

#: the longest a pass holds the loop between two turns of the other tasks
SLICE_S = 0.01


class LoopSlice:
    """`await pause_if_due()` between items of a long pass; `pauses` counts the turns
    given."""

    __slots__ = ("slice_s", "pauses", "_started")

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self.slice_s = slice_s
        self.pauses = 0
        self._started = time.monotonic()

    async def pause_if_due(self) -> None:
        if time.monotonic() - self._started > self.slice_s:
            await anyio.sleep(0)
            self.pauses += 1
            self._started = time.monotonic()
