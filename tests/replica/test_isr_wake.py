"""A follower that caught up before it registered joins the ISR when its registration
arrives, not at the next check (issue 25: a restarted broker's followers fetch while it
starts, before it registers). The leader's publisher wakes the ISR manager whenever the
live brokers change."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio

from pybroker.metadata.publisher import MetadataPublisher
from pybroker.metrics import BrokerMetrics
from pybroker.replica.isr import IsrManager

#: replica.lag.time.max.ms: the periodic check comes every half of it (30 s here)
LAG_TIME_MAX_MS = 60_000


class _Led:
    """A partition led here (broker 1) whose follower 2 has caught up."""

    is_leader = True
    topic = "t"
    index = 0

    def isr_to_shrink(self, lag_time_max_ms: int) -> list[int] | None:
        return None

    def isr_to_expand(self, eligible: Any) -> list[int] | None:
        return [1, 2] if 2 in eligible else None


def test_a_broker_registering_wakes_the_isr_check() -> None:
    brokers: dict[int, object] = {1: object()}
    metadata = SimpleNamespace(brokers=brokers, set_brokers=lambda endpoints: None)
    publisher = MetadataPublisher(metadata, None, None)  # type: ignore[arg-type]
    replicas = SimpleNamespace(partitions={("t", 0): _Led()}, on_isr_candidate=None)
    listener = SimpleNamespace(publisher=publisher, assignments={}, states={})
    written: list[list[tuple[Any, list[int], bool]]] = []

    async def write(changes: list[tuple[Any, list[int], bool]]) -> None:
        written.append(changes)

    async def main() -> None:
        isr = IsrManager(replicas, SimpleNamespace(), listener,  # type: ignore[arg-type]
                         LAG_TIME_MAX_MS, BrokerMetrics())
        publisher.broker_listeners.append(isr.wake)
        isr._write = write  # type: ignore[method-assign]
        async with anyio.create_task_group() as tg:
            tg.start_soon(isr.run)
            isr.wake()  # a check now: broker 2 is not live, nothing to do
            await anyio.sleep(0.2)
            assert written == []
            brokers[2] = object()  # broker 2 registers
            publisher.brokers_changed([])
            with anyio.fail_after(5):  # far below the 30 s of the periodic check
                while not written:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()

    anyio.run(main)
    [[(_, isr_after, expand)]] = written
    assert isr_after == [1, 2] and expand
