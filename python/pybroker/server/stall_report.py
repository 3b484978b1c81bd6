"""An opt-in reporter of event-loop stalls: what the loop thread was doing when it was late.

Every request, fetch, heartbeat and ZooKeeper watch of the broker waits for the one
event-loop thread, so a blocking call on it (an fsync, a big serialisation, a loop over
every partition) delays all of them; bench/latency.py's loop-lag probe sees such a stall
from outside, but not its cause. With `event.loop.stall.report.ms` > 0 (0, the default,
starts nothing), two cheap parts run:

- a loop task sleeps a quarter of the threshold at a time and measures how late it wakes:
  lateness at or over the threshold is a stall, logged at WARNING once it is over, with
  its length and where the loop was;
- a daemon watchdog thread wakes as often and, while the loop is late by more than half
  the threshold, samples the loop thread's Python stack (`sys._current_frames()`): that
  is the "where". The samples are taken while the stall lasts, not after it, so they show
  the blocking call itself. A sample in the selector's wait (the loop idle from Python's
  view), or none, means the time went elsewhere: the GIL held by another thread, or the
  process not scheduled (on a loaded machine).

Nothing of this is on the request path: the loop pays one timer wake-up per quarter of
the threshold, the watchdog one per the same period (a dict read when the loop is on
time)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from types import FrameType

import anyio

from pybroker.server.gc_policy import PAUSES

log = logging.getLogger(__name__)

#: distinct stack samples kept per stall (a long stall is sampled many times)
MAX_SAMPLES = 4
#: innermost frames of a sample that are logged
SAMPLE_DEPTH = 14


class StallReporter:
    """Run `run()` in the broker's task group; it logs every stall of at least
    `threshold_s`, and counts them (`stalls`, `longest_s`) for the metrics."""

    def __init__(self, threshold_s: float) -> None:
        if threshold_s <= 0:
            raise ValueError("the stall threshold must be positive")
        self.threshold_s = threshold_s
        self.tick_s = threshold_s / 4
        self.stalls = 0
        self.longest_s = 0.0
        #: when the loop task went to sleep, and the monotonic time it should wake at
        self._due = time.monotonic()
        #: the stack samples of the current beat and how often each was seen (the
        #: watchdog adds, the loop swaps in a new dict for each beat)
        self._samples: dict[str, int] = {}
        self._loop_thread = 0

    async def run(self) -> None:
        self._loop_thread = threading.get_ident()
        stop = threading.Event()
        watchdog = threading.Thread(target=self._watch, args=(stop,),
                                    name="loop-stall-watchdog", daemon=True)
        watchdog.start()
        try:
            while True:
                self._samples = {}
                self._due = time.monotonic() + self.tick_s
                gc_before = PAUSES.total_s
                full_before = (PAUSES.count[PAUSES.FULL], PAUSES.seconds[PAUSES.FULL])
                await anyio.sleep(self.tick_s)
                late = time.monotonic() - self._due
                if late >= self.threshold_s:
                    self._report(late, self._samples, PAUSES.total_s - gc_before,
                                 PAUSES.count[PAUSES.FULL] - full_before[0],
                                 PAUSES.seconds[PAUSES.FULL] - full_before[1])
        finally:
            stop.set()

    def _report(self, late_s: float, samples: dict[str, int], gc_s: float = 0.0,
                full_gcs: int = 0, full_gc_s: float = 0.0) -> None:
        self.stalls += 1
        self.longest_s = max(self.longest_s, late_s)
        where = "\n".join(f"  seen {n} time(s):\n{stack}"
                          for stack, n in sorted(samples.items(), key=lambda x: -x[1])) or (
            "  (no sample: the watchdog thread did not run during the stall either: the "
            "process was not scheduled, or the GIL was held by code that does not release "
            "it)")
        log.warning("event loop stalled for %.0f ms (event.loop.stall.report.ms=%.0f), of "
                    "which %.0f ms in the cyclic GC (%d full collections, %.0f ms): every "
                    "request waited meanwhile. Nothing to do for a single stall under load; "
                    "repeated stalls in one place are worth reporting with these lines. "
                    "Where the loop thread was, sampled during the stall:\n%s",
                    late_s * 1000, self.threshold_s * 1000, gc_s * 1000, full_gcs,
                    full_gc_s * 1000, where)

    def _watch(self, stop: threading.Event) -> None:
        half = self.threshold_s / 2
        while not stop.wait(self.tick_s):
            due = self._due
            if time.monotonic() - due < half:
                continue
            samples = self._samples
            frame = sys._current_frames().get(self._loop_thread)
            if frame is None or due != self._due:  # gone, or the loop caught up
                continue
            stack = _format(frame)
            if stack in samples or len(samples) < MAX_SAMPLES:
                samples[stack] = samples.get(stack, 0) + 1
        del frame


def _format(frame: FrameType) -> str:
    """The innermost SAMPLE_DEPTH frames, outermost first, one "path:line in name" a
    line (no source lines: nothing is read from disk), paths from the package down."""
    lines: list[str] = []
    current: FrameType | None = frame
    while current is not None and len(lines) < SAMPLE_DEPTH:
        path = current.f_code.co_filename
        cut = max(path.rfind("/pybroker/"), path.rfind("/site-packages/"),
                  path.rfind("/asyncio/"))
        if cut >= 0:
            path = path[cut + 1:]
        lines.append(f"    {path}:{current.f_lineno} in {current.f_code.co_name}")
        current = current.f_back
    return "\n".join(reversed(lines))
