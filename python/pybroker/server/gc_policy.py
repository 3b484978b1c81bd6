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

The same holds for what the broker builds later and keeps: every partition it hosts
is ~18 tracked objects on one node (its log, replica state, metadata cache entry and
their lists; more with followers and fetch sessions), so at 3,000 partitions RF 3 a
broker's full collections walked ~10^5 objects, 20-570 ms each on the loaded bench
machine, the longest single stalls of a controlled shutdown or a restart (issue 25,
bench/RESULTS.md). So a full collection that took `FREEZE_AFTER_FULL_S` of CPU or more
freezes what it left: at its end the oldest generation holds exactly what survived it
(the garbage is gone, the younger generations are empty), which is long-lived state;
the next full collections walk only what is allocated after. Nothing is disabled.

What a freeze costs: a frozen object is still freed when its last reference goes (a
deleted topic's partition state holds no reference cycle: tests/server/test_gc_freeze),
but a cycle of frozen objects that becomes garbage later is never collected. A client
connection's objects are such a cycle today: a connection open at a freeze and closed
later stays in memory (a few KiB). So a freeze also needs the broker's long-lived state
to have grown: `growth`, the partitions it hosts plus the partition state changes it has
taken (a count that only grows), at least `FREEZE_GROWTH` times, and `FREEZE_MIN_GROWTH`
more than, at the last freeze. A broker's life then has a bounded number of freezes,
logarithmic in that count (about 25 from 100 to 30,000 partitions; about 45 more over a
billion state changes), however often topics come and go or clients reconnect; a slow
full collection without such growth (many connections) is left as it is.

The state changes count because each replaces what the broker keeps of a partition (its
state, the metadata cache's entry, the replica's lists; a takeover's follower states)
with new objects: after a controlled shutdown or a restart at 10,000 partitions RF 3
most of a broker's partition state is new, unfrozen, and every later full collection
walked it again (tens of ms each), with no freeze while the partitions hosted stayed the
same (issue 25). The frozen objects it replaced are still freed (no cycle).

`GcPauses` times every collection, per generation (gc.callbacks): the counts, the
total and the longest pause are metrics, and the stall reporter says how much of a
stall was the collector's."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: a full collection of at least this much CPU time freezes what survived it (see
#: above): well under the 50 ms stall goal, the walk of ~50k objects; CPU time, not
#: the wall clock, so that a loaded machine's preemption does not make freezes of
#: small heaps
FREEZE_AFTER_FULL_S = 0.010
#: ... once the hosted partitions are this many times those at the last freeze
FREEZE_GROWTH = 1.25
#: ... and at least this many more
FREEZE_MIN_GROWTH = 100


def freeze_startup_heap() -> int:
    """Collect once, then freeze what survives; returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("froze %d startup objects out of the cyclic collector", frozen)
    return frozen


class GcPauses:
    """Per generation: collections, seconds spent in them, the longest one; and the
    freeze after a slow full collection (`freeze_after_s`, None: never) once `growth()`
    (the hosted partitions plus the states taken; None: no freezes) grew enough since
    the last. The callback
    runs on whichever thread triggered the collection (it holds the GIL, so every
    thread waits for it alike): two clock reads a collection."""

    GENERATIONS = 3
    #: the oldest generation's index: its collections are the full ones
    FULL = GENERATIONS - 1

    def __init__(self, freeze_after_s: float | None = FREEZE_AFTER_FULL_S) -> None:
        self.freeze_after_s = freeze_after_s
        #: freezes made after a slow full collection
        self.freezes = 0
        self.count = [0] * self.GENERATIONS
        self.seconds = [0.0] * self.GENERATIONS
        self.longest_s = [0.0] * self.GENERATIONS
        #: the collecting thread's CPU seconds (on a loaded machine the wall clock also
        #: counts the time the process was not scheduled)
        self.cpu_s = [0.0] * self.GENERATIONS
        self.longest_cpu_s = [0.0] * self.GENERATIONS
        self._started_cpu = 0.0
        #: seconds in any collection since the start (the stall reporter diffs it)
        self.total_s = 0.0
        self._started = 0.0
        #: the hosted partitions, read when a freeze is considered
        self.growth: Callable[[], int] | None = None
        #: what `growth()` was at the last freeze (or at install)
        self.frozen_at = 0

    def install(self, growth: Callable[[], int] | None = None) -> GcPauses:
        """Start timing; `growth` counts the long-lived state a freeze waits for (what
        it is now is the baseline: the start's own heap is frozen already)."""
        self.growth = growth
        self.frozen_at = growth() if growth is not None else 0
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)
        return self

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def summary(self) -> str:
        """Per generation: collections, seconds, the longest (for a log line)."""
        return ", ".join(
            f"generation {g}: {n} in {s:.3f} s (CPU {c:.3f} s), longest {m * 1000:.1f} ms "
            f"(CPU {mc * 1000:.1f} ms)"
            for g, (n, s, m, c, mc) in enumerate(zip(
                self.count, self.seconds, self.longest_s, self.cpu_s, self.longest_cpu_s,
                strict=True))) + f", {self.freezes} freezes"

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            self._started_cpu = time.thread_time()
            return
        took = time.perf_counter() - self._started
        cpu = time.thread_time() - self._started_cpu
        generation = info["generation"]
        self.cpu_s[generation] += cpu
        if cpu > self.longest_cpu_s[generation]:
            self.longest_cpu_s[generation] = cpu
        self.count[generation] += 1
        self.seconds[generation] += took
        self.total_s += took
        if took > self.longest_s[generation]:
            self.longest_s[generation] = took
        if (generation == GcPauses.FULL and self.freeze_after_s is not None
                and cpu >= self.freeze_after_s and self._grown()):
            # the collection is over (the "stop" callback): the oldest generation holds
            # only its survivors and the younger ones are empty; freezing moves list
            # heads, it neither allocates nor walks
            gc.freeze()
            self.freezes += 1

    def _grown(self) -> bool:
        if self.growth is None:
            return False
        now = self.growth()
        if now < max(self.frozen_at * FREEZE_GROWTH, self.frozen_at + FREEZE_MIN_GROWTH):
            return False
        self.frozen_at = now
        return True


#: the process's one accounting (installed by the broker at start)
PAUSES = GcPauses()
