"""The cyclic garbage collector and the request path's tail latency.

A full (oldest-generation) collection walks every tracked object and blocks the
event loop meanwhile. Right after startup the broker holds ~30k long-lived objects
(modules, classes, config, the wiring) that will never be garbage, and walking them
took 65-75 ms per full collection on the loaded 2-core bench machine: each one stalls
every request in flight, which is what the latency benchmark's p99.9 sees (issue 18,
bench/RESULTS.md). Freezing them once the broker is wired moves them out of the
collector's generations (CPython's gc.freeze, made for this), so later full
collections walk only what was allocated since. Nothing is disabled: cycles made
after startup are still found and freed.

`GcPauses` times every collection, per generation (gc.callbacks): the counts, the
total and the longest pause are metrics, and the stall reporter says how much of a
stall was the collector's."""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

log = logging.getLogger(__name__)


def freeze_startup_heap() -> int:
    """Collect once, then freeze what survives; returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("froze %d startup objects out of the cyclic collector", frozen)
    return frozen


class GcPauses:
    """Per generation: collections, seconds spent in them, the longest one. The
    callback runs on whichever thread triggered the collection (it holds the GIL, so
    every thread waits for it alike): two clock reads a collection."""

    GENERATIONS = 3

    def __init__(self) -> None:
        self.count = [0] * self.GENERATIONS
        self.seconds = [0.0] * self.GENERATIONS
        self.longest_s = [0.0] * self.GENERATIONS
        #: seconds in any collection since the start (the stall reporter diffs it)
        self.total_s = 0.0
        self._started = 0.0

    def install(self) -> GcPauses:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)
        return self

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        generation = info["generation"]
        self.count[generation] += 1
        self.seconds[generation] += took
        self.total_s += took
        if took > self.longest_s[generation]:
            self.longest_s[generation] = took


#: the process's one accounting (installed by the broker at start)
PAUSES = GcPauses()
