"""The purgatory: waiters wake on their keys, time out, and leave nothing behind."""

from __future__ import annotations

import asyncio
import time

import anyio

from pybroker.purgatory import COMPACT_FACTOR, COMPACT_MIN, Purgatory


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


def test_waits_share_one_loop_timer() -> None:
    """Every wait has its deadline, but the waits share one loop timer armed for the
    earliest one parked (issue 26): 200 fetches woken before their time arm it once,
    not 200 times (a timer per wait fails this)."""
    async def run() -> None:
        loop = asyncio.get_running_loop()
        armed = []
        call_at = loop.call_at

        def counting_call_at(when, callback, *args, **kwargs):  # type: ignore[no-untyped-def]
            armed.append(when)
            return call_at(when, callback, *args, **kwargs)

        loop.call_at = counting_call_at  # type: ignore[method-assign]
        purgatory = Purgatory()
        for _ in range(200):
            task = asyncio.ensure_future(purgatory.wait_for_notify("fetch", ["k"], 30.0))
            await asyncio.sleep(0)
            purgatory.notify("k")
            assert await task
        assert len(armed) <= 2, len(armed)
        assert purgatory.size == 0 and not purgatory._watchers

    asyncio.run(run())


def test_a_shorter_wait_behind_a_longer_one_times_out_on_time() -> None:
    async def run() -> None:
        purgatory = Purgatory()
        long = asyncio.ensure_future(purgatory.wait_for_notify("produce", ["a"], 30.0))
        await asyncio.sleep(0)
        started = time.monotonic()
        assert not await asyncio.wait_for(
            purgatory.wait_for_notify("fetch", ["b"], 0.05), timeout=5)
        assert time.monotonic() - started >= 0.04
        assert not long.done()  # the longer wait is still parked
        # and one more after the timer moved on, shorter again
        assert not await asyncio.wait_for(
            purgatory.wait_for_notify("fetch", ["b"], 0.02), timeout=5)
        purgatory.notify("a")
        assert await long
        assert purgatory.size == 0 and not purgatory._watchers

    asyncio.run(run())


def test_woken_waits_behind_a_long_one_are_not_kept() -> None:
    """The deadline entries of waits already over are dropped before they pile up behind
    a parked acks=all produce's 30 s one."""
    async def run() -> None:
        purgatory = Purgatory()
        long = asyncio.ensure_future(purgatory.wait_for_notify("produce", ["a"], 30.0))
        await asyncio.sleep(0)
        for _ in range(5000):
            task = asyncio.ensure_future(purgatory.wait_for_notify("fetch", ["k"], 31.0))
            await asyncio.sleep(0)
            purgatory.notify("k")
            await task
        assert len(purgatory._deadlines) <= COMPACT_MIN + COMPACT_FACTOR * 2 + 1
        purgatory.notify("a")
        assert await long

    asyncio.run(run())
