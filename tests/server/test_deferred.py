"""Owed answers (pybroker.server.deferred): written in request order, those ready
together in one send, by one task per connection waiting in the purgatory for the
oldest only (issue 26: a task, a registration and a timer per acks=all produce were a
fifth of the leader's Python time)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from pybroker.purgatory import Purgatory
from pybroker.server.deferred import DeferredAnswers, DeferredResponse

KEY = ("hw", "t", 0)


class Conn:
    """What DeferredAnswers uses of a Connection: write, flush, abort, peer."""

    peer = "test"

    def __init__(self) -> None:
        self.queued: list[object] = []
        #: each flush's parts, in order
        self.sends: list[list[object]] = []
        self.aborted: str | None = None

    async def write(self, parts: Sequence[object], *, flush: bool = True) -> None:
        self.queued.extend(parts)
        if flush:
            await self.flush()

    async def flush(self) -> None:
        if self.queued:
            self.sends.append(self.queued)
            self.queued = []
        await asyncio.sleep(0)

    def abort(self, reason: str) -> None:
        self.aborted = reason


class Watermark:
    def __init__(self, purgatory: Purgatory) -> None:
        self.value = 0
        self.purgatory = purgatory

    def move(self, value: int) -> None:
        self.value = value
        self.purgatory.notify(KEY)

    def waits_for(self, offset: int, name: str, timeout_s: float = 5.0) -> DeferredResponse:
        return DeferredResponse(self.purgatory, [KEY], lambda: self.value >= offset,
                                lambda: {"name": name, "ok": self.value >= offset},
                                time.monotonic() + timeout_s)


def answer(response: DeferredResponse | None, name: str) -> object:
    if response is None:
        return lambda: [name]
    return lambda: [response.finish()["name"] + ("" if response.finish()["ok"] else "!")]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_answers_go_in_order_those_ready_together_with_one_task() -> None:
    async def run() -> None:
        purgatory = Purgatory()
        hw = Watermark(purgatory)
        conn = Conn()
        owed = DeferredAnswers(conn)  # type: ignore[arg-type]
        tasks_before = len(asyncio.all_tasks())
        for i, offset in enumerate([3, 1, 2, 5]):
            waits = hw.waits_for(offset, f"r{i}")
            owed.add(waits, answer(waits, f"r{i}"))
        owed.add(None, answer(None, "now"))  # waits only for those before it
        await settle()
        assert len(owed) == 5
        # one writer for every owed answer, not a task each
        assert len(asyncio.all_tasks()) - tasks_before == 1
        assert purgatory.waiting["produce"] == 4
        hw.move(2)  # settles r1 and r2, but r0 (offset 3) is first: nothing goes
        await settle()
        assert conn.sends == []
        hw.move(3)  # r0, r1, r2 go together; r3 still waits, and "now" behind it
        await settle()
        assert conn.sends == [["r0", "r1", "r2"]]
        assert len(owed) == 2 and purgatory.waiting["produce"] == 1
        hw.move(5)
        await owed.drain()
        await settle()
        assert conn.sends == [["r0", "r1", "r2"], ["r3", "now"]]
        assert purgatory.waiting["produce"] == 0 and purgatory.size == 0
        assert not purgatory._watchers
        assert len(asyncio.all_tasks()) == tasks_before

    asyncio.run(run())


def test_the_oldest_is_answered_at_its_deadline_and_the_next_ones_after_it() -> None:
    async def run() -> None:
        purgatory = Purgatory()
        hw = Watermark(purgatory)
        conn = Conn()
        owed = DeferredAnswers(conn)  # type: ignore[arg-type]
        first = hw.waits_for(10, "late", timeout_s=0.05)
        owed.add(first, answer(first, "late"))
        second = hw.waits_for(1, "ready")
        owed.add(second, answer(second, "ready"))
        hw.move(1)
        await settle()
        assert conn.sends == []  # "ready" waits behind the oldest
        await asyncio.wait_for(owed.drain(), 5)
        await settle()
        assert conn.sends == [["late!", "ready"]]  # the oldest timed out
        assert purgatory.size == 0

    asyncio.run(run())


def test_wait_below_and_cancel() -> None:
    async def run() -> None:
        purgatory = Purgatory()
        hw = Watermark(purgatory)
        conn = Conn()
        owed = DeferredAnswers(conn)  # type: ignore[arg-type]
        for i in range(3):
            waits = hw.waits_for(i + 1, f"r{i}")
            owed.add(waits, answer(waits, f"r{i}"))
        below = asyncio.ensure_future(owed.wait_below(3))
        await settle()
        assert not below.done()
        hw.move(1)
        await asyncio.wait_for(below, 5)
        assert len(owed) == 2
        owed.cancel()  # the connection ends: what is still owed is dropped
        await settle()
        assert len(owed) == 0 and purgatory.size == 0 and not purgatory._watchers
        await asyncio.wait_for(owed.drain(), 5)
        assert conn.sends == [["r0"]] and conn.aborted is None

    asyncio.run(run())
