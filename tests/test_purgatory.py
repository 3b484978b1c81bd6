"""The purgatory: waiters wake on their keys, time out, and leave nothing behind."""

from __future__ import annotations

import time

import anyio

from pybroker.purgatory import Purgatory


def test_wait_until_wakes_on_notify_and_times_out() -> None:
    async def run() -> None:
        purgatory = Purgatory()
        state = {"ready": False}

        async def later() -> None:
            await anyio.sleep(0.05)
            state["ready"] = True
            purgatory.notify("k")

        async with anyio.create_task_group() as tg:
            tg.start_soon(later)
            assert await purgatory.wait_until("fetch", ["k"], lambda: state["ready"],
                                              time.monotonic() + 10)
        assert not await purgatory.wait_until("fetch", ["k"], lambda: False,
                                              time.monotonic() + 0.05)
        assert purgatory.size == 0 and not purgatory._watchers

    anyio.run(run)


def test_cancelled_waiter_leaves_no_registration() -> None:
    async def run() -> None:
        purgatory = Purgatory()
        async with anyio.create_task_group() as tg:
            tg.start_soon(purgatory.wait_for_notify, "produce", ["a", "b"], 60.0)
            await anyio.sleep(0.01)
            assert purgatory.waiting["produce"] == 1
            tg.cancel_scope.cancel()  # the client left
        assert purgatory.size == 0 and not purgatory._watchers

    anyio.run(run)
