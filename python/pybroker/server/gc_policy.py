"""The cyclic garbage collector and the request path's tail latency.

A full (oldest-generation) collection walks every tracked object and blocks the
event loop meanwhile. Right after startup the broker holds ~30k long-lived objects
(modules, classes, config, the wiring) that will never be garbage, and walking them
took 65-75 ms per full collection on the loaded 2-core bench machine: each one stalls
every request in flight, which is what the latency benchmark's p99.9 sees (issue 18,
bench/RESULTS.md). Freezing them once the broker is wired moves them out of the
collector's generations (CPython's gc.freeze, made for this), so later full
collections walk only what was allocated since. Nothing is disabled: cycles made
after startup are still found and freed."""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def freeze_startup_heap() -> int:
    """Collect once, then freeze what survives; returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("froze %d startup objects out of the cyclic collector", frozen)
    return frozen
