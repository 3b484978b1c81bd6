"""The cyclic collector's pauses are timed per generation (gc.callbacks), exposed as
metrics, and a stall the collector caused says so in the stall report (issue 25)."""

from __future__ import annotations

import gc
import logging
import time

import anyio
import pytest

from pybroker.metrics import BrokerMetrics
from pybroker.metrics.exposition import render
from pybroker.server import gc_policy
from pybroker.server.stall_report import StallReporter


class _Cyclic:
    def __init__(self) -> None:
        self.me = self


def test_a_full_collection_is_counted_and_timed() -> None:
    pauses = gc_policy.GcPauses().install()
    try:
        gc.collect(0)
        gc.collect()
    finally:
        pauses.uninstall()
    assert pauses.count[0] >= 1 and pauses.count[2] >= 1
    assert pauses.seconds[2] > 0 and pauses.longest_s[2] <= pauses.seconds[2]
    assert pauses.total_s >= pauses.seconds[2]
    gc.collect()  # uninstalled: no longer counted
    assert pauses.count[2] == 1
    assert "generation 2: 1 in " in pauses.summary()


def test_the_metrics_show_the_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = gc_policy.GcPauses()
    pauses.count[2], pauses.seconds[2], pauses.longest_s[2] = 3, 0.25, 0.125
    monkeypatch.setattr("pybroker.metrics.exposition.PAUSES", pauses)
    text = render(BrokerMetrics())
    assert 'pybroker_gc_collections_total{generation="2"} 3' in text
    assert 'pybroker_gc_pause_seconds_total{generation="2"} 0.25' in text
    assert 'pybroker_gc_pause_seconds_max{generation="2"} 0.125' in text


async def _stall_in_a_full_collection(reporter: StallReporter) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(reporter.run)
        await anyio.sleep(0.2)
        garbage = [_Cyclic() for _ in range(1000)]
        del garbage
        # a full collection that takes a while: a callback stands in for a big heap
        gc.callbacks.insert(0, _slow)  # before the timer's stop: timed
        # a stall reported before (a loaded machine's) is not the one looked for: the
        # first reported after the collection is the beat that spans it
        before = reporter.stalls
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(_slow)
        with anyio.fail_after(10):
            while reporter.stalls == before:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()


def _slow(phase: str, info: dict[str, int]) -> None:
    if phase == "stop":
        time.sleep(0.3)


def test_a_stall_in_the_collector_is_reported_as_such(caplog: pytest.LogCaptureFixture,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = gc_policy.GcPauses()
    monkeypatch.setattr("pybroker.server.stall_report.PAUSES", pauses)
    pauses.install()
    try:
        with caplog.at_level(logging.WARNING, logger="pybroker.server.stall_report"):
            anyio.run(_stall_in_a_full_collection, StallReporter(0.1))
    finally:
        pauses.uninstall()
    reports = [r.getMessage() for r in caplog.records if "event loop stalled" in r.getMessage()]
    assert reports, caplog.text
    gc_ms = [int(m.split("of which ")[1].split(" ms")[0]) for m in reports]
    assert max(gc_ms) >= 200, reports
    assert any("(1 full collections, " in m for m in reports), reports
    full_ms = [int(m.split("full collections, ")[1].split(" ms")[0]) for m in reports]
    assert max(full_ms) >= 200, reports  # the slow collection is the full one
