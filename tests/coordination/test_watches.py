"""The dispatcher every backend runs callbacks on."""

from __future__ import annotations

import threading

import anyio
import pytest

from pybroker.coordination.watches import Dispatcher

pytestmark = pytest.mark.anyio


async def test_callbacks_run_one_at_a_time_in_order() -> None:
    dispatcher = Dispatcher()
    dispatcher.start()
    log: list[str] = []

    def job(name: str, pause_s: float = 0.0):
        async def run() -> None:
            log.append(f"{name} start")
            await anyio.sleep(pause_s)
            log.append(f"{name} end")
        return run

    dispatcher.submit(job("slow", 0.05))
    dispatcher.submit(job("fast"))
    await dispatcher.wait_idle()
    assert log == ["slow start", "slow end", "fast start", "fast end"]
    await dispatcher.close()


async def test_a_failing_callback_does_not_stop_the_next(caplog: pytest.LogCaptureFixture,
                                                         ) -> None:
    dispatcher = Dispatcher()
    dispatcher.start()
    ran: list[int] = []

    def broken() -> None:
        raise ValueError("bug in a watcher")

    dispatcher.submit(broken)
    dispatcher.submit(lambda: ran.append(1))
    await dispatcher.wait_idle()
    assert ran == [1]
    assert "bug in a watcher" in caplog.text
    await dispatcher.close()


async def test_keyed_jobs_coalesce_and_other_threads_may_submit() -> None:
    dispatcher = Dispatcher()
    dispatcher.start()
    ran: list[str] = []
    gate = anyio.Event()

    async def hold() -> None:
        await gate.wait()

    dispatcher.submit(hold)
    for _ in range(5):  # queued behind `hold` under one key: runs once
        dispatcher.submit(lambda: ran.append("refresh"), key="k")
    thread = threading.Thread(target=dispatcher.submit, args=(lambda: ran.append("thread"),))
    thread.start()
    thread.join()
    await anyio.sleep(0.05)  # let call_soon_threadsafe's callback land
    gate.set()
    await dispatcher.wait_idle()
    assert ran == ["refresh", "thread"]
    await dispatcher.close()


async def test_run_waits_for_the_job_but_not_from_inside_a_callback() -> None:
    dispatcher = Dispatcher()
    dispatcher.start()
    ran: list[str] = []

    async def outer() -> None:
        await dispatcher.run(lambda: ran.append("inner"))  # would deadlock if it waited
        ran.append("outer")

    with anyio.fail_after(5):
        await dispatcher.run(outer)
    assert ran[0] == "outer"
    await dispatcher.wait_idle()
    assert ran == ["outer", "inner"]
    await dispatcher.close()
    await dispatcher.run(lambda: ran.append("after close"))  # no hang once closed
