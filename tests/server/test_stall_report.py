"""The opt-in event-loop stall reporter (issue 25): a blocking call on the loop is
reported with the loop thread's stack sampled during it; a real broker started with
event.loop.stall.report.ms logs the stalls it has."""

from __future__ import annotations

import logging
import os
import signal
import time

import anyio
import pytest

from pybroker.server.stall_report import StallReporter
from tests.conftest import BrokerFactory

BLOCK_S = 0.4


def _hold_the_loop_with_a_blocking_call() -> None:
    time.sleep(BLOCK_S)  # what an fsync on the loop looks like from the loop


async def _run_with_a_stall(reporter: StallReporter) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(reporter.run)
        await anyio.sleep(0.2)  # the reporter's first beats go by on time
        _hold_the_loop_with_a_blocking_call()
        with anyio.fail_after(10):  # the beat after the stall reports it
            while reporter.stalls == 0:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()


def test_a_blocking_call_on_the_loop_is_reported_with_where_it_was(
        caplog: pytest.LogCaptureFixture) -> None:
    reporter = StallReporter(0.1)
    with caplog.at_level(logging.WARNING, logger="pybroker.server.stall_report"):
        anyio.run(_run_with_a_stall, reporter)
    reports = [r.getMessage() for r in caplog.records if "event loop stalled" in r.getMessage()]
    assert reports, caplog.text
    assert reporter.longest_s >= BLOCK_S * 0.8
    # sampled during the stall: the blocking call and its caller are in the stack
    assert any("_hold_the_loop_with_a_blocking_call" in m
               and "_run_with_a_stall" in m for m in reports), reports


def test_the_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError):
        StallReporter(0)


def test_a_broker_with_the_reporter_on_logs_a_stall(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"event.loop.stall.report.ms": 100})
    assert broker.proc is not None
    # the whole process stopped for a while: the loop wakes that late
    os.kill(broker.proc.pid, signal.SIGSTOP)
    time.sleep(0.5)
    os.kill(broker.proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while "event loop stalled for" not in broker.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, broker.log_tail()
        time.sleep(0.1)
