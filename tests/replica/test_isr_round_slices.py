"""An ISR round over thousands of led partitions lets the other tasks in as it goes
(issue 25): the pass was one block of the event loop, hundreds of ms at 3,000
partitions on a loaded machine, and every request waited for it."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import anyio

from pybroker.metrics import BrokerMetrics
from pybroker.replica.isr import IsrManager

PARTITIONS = 300
#: what one partition's check costs in the stand-in (a loaded machine's)
CHECK_S = 0.001


class _LedPartition:
    """A partition led here whose ISR keeps up: the round checks it, changes nothing."""

    is_leader = True
    topic = "t"

    def __init__(self, seen: list[int], ticks: list[int]) -> None:
        self._seen = seen
        self._ticks = ticks

    def isr_to_shrink(self, lag_time_max_ms: int) -> list[int] | None:
        time.sleep(CHECK_S)  # holds the loop, as the real check's work does
        self._seen.append(self._ticks[0])
        return None

    def isr_to_expand(self, eligible: Any) -> list[int] | None:
        return None


def test_an_isr_round_gives_other_tasks_turns() -> None:
    seen: list[int] = []  # the other task's tick count at each partition's check
    ticks = [0]
    replicas = SimpleNamespace(
        partitions={("t", i): _LedPartition(seen, ticks) for i in range(PARTITIONS)},
        on_isr_candidate=None)
    listener = SimpleNamespace(publisher=SimpleNamespace(metadata=SimpleNamespace(brokers={})),
                               assignments={}, states={})
    isr = IsrManager(replicas, SimpleNamespace(), listener, 100,  # type: ignore[arg-type]
                     BrokerMetrics())

    async def other_task() -> None:
        while True:
            ticks[0] += 1
            await anyio.sleep(0)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(other_task)
            tg.start_soon(isr.run)
            with anyio.fail_after(60):
                while len(seen) < PARTITIONS:  # one whole round
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()

    anyio.run(main)
    first_round = seen[:PARTITIONS]
    # the other task ran while the round was going (not only before and after it)
    assert first_round[-1] > first_round[0], (first_round[0], first_round[-1])
