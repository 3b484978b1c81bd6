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
from tests.loop_turns import Turns

PARTITIONS = 300
#: what one partition's check costs in the stand-in (a loaded machine's)
CHECK_S = 0.001


class _LedPartition:
    """A partition led here whose ISR keeps up: the round checks it, changes nothing."""

    is_leader = True
    topic = "t"

    def __init__(self, turns: Turns) -> None:
        self._turns = turns

    def isr_to_shrink(self, lag_time_max_ms: int) -> list[int] | None:
        time.sleep(CHECK_S)  # holds the loop, as the real check's work does
        self._turns.note()
        return None

    def isr_to_expand(self, eligible: Any) -> list[int] | None:
        return None


def test_an_isr_round_gives_other_tasks_turns() -> None:
    turns = Turns()  # with the count at each partition's check
    replicas = SimpleNamespace(
        partitions={("t", i): _LedPartition(turns) for i in range(PARTITIONS)},
        on_isr_candidate=None)
    listener = SimpleNamespace(publisher=SimpleNamespace(metadata=SimpleNamespace(brokers={})),
                               assignments={}, states={})
    isr = IsrManager(replicas, SimpleNamespace(), listener, 100,  # type: ignore[arg-type]
                     BrokerMetrics())

    async def one_round() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(isr.run)
            with anyio.fail_after(60):
                while len(turns.seen) < PARTITIONS:  # one whole round
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()

    turns.run(one_round)
    first_round = turns.seen[:PARTITIONS]
    # the other task ran while the round was going (not only before and after it)
    assert first_round[-1] > first_round[0], (first_round[0], first_round[-1])
