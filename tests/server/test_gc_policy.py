"""The broker freezes its startup heap out of the cyclic GC (issue 18: full
collections walking ~30k long-lived objects stalled the event loop)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from tests.fuzz.inprocess import InProcessBroker


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_startup_heap_is_frozen_and_later_cycles_are_still_collected(tmp_path: Path) -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    broker = InProcessBroker(tmp_path / "data")
    try:
        # serve() has wired everything and started listening (the in-process broker's
        # context exists only then): the objects alive at that point are frozen
        assert gc.get_freeze_count() > 1000
        assert gc.isenabled()
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None  # a cycle made after startup is still freed
    finally:
        broker.close()
        gc.unfreeze()
