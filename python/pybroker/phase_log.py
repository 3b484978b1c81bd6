"""One INFO line per start-up phase instead of one per partition.

Loads that come in a burst (the 50 offsets partitions a broker leads after a start, the
logs it opens) are tallied, and the burst is logged once, with the counts and how long
it took, when it ends: when nothing more arrived for QUIET_S. The per-partition lines
stay, at DEBUG."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator

#: a burst has ended once nothing was added for this long
QUIET_S = 0.5


class Tally:
    """Counts of one phase's items; `line(counts, partitions, seconds)` renders the
    summary. Outside an event loop (a synchronous caller) each add is logged at once."""

    def __init__(self, logger: logging.Logger,
                 line: Callable[[dict[str, int], int, float], str]) -> None:
        self.logger = logger
        self.line = line
        self.counts: dict[str, int] = {}
        self.items = 0
        self.started = 0.0
        self.last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        #: batches of items under way (see ongoing): the burst does not end meanwhile
        self.busy = 0

    def add(self, seconds: float = 0.0, **counts: int) -> None:
        """One item (a partition loaded, `seconds` ago its load began) and its counts."""
        now = time.monotonic()
        if not self.items:
            self.started = now - seconds
        self.items += 1
        self.last = now
        for key, value in counts.items():
            self.counts[key] = self.counts.get(key, 0) + value
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._timer is None:
            self._timer = loop.call_later(QUIET_S, self._check)

    @contextlib.contextmanager
    def ongoing(self) -> Iterator[None]:
        """A batch of items is being loaded (on a worker thread, added when it is done):
        the burst goes on meanwhile, however long the batch takes."""
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1
            self.last = time.monotonic()

    def _check(self) -> None:
        self._timer = None
        left = self.last + QUIET_S - time.monotonic()
        if self.busy:
            left = QUIET_S
        if left > 0:
            self._timer = asyncio.get_running_loop().call_later(left, self._check)
            return
        self.flush()

    def flush(self) -> None:
        if not self.items:
            return
        self.logger.info(self.line(self.counts, self.items, self.last - self.started))
        self.counts = {}
        self.items = 0
