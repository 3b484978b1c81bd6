"""A follower catching up on one partition has that partition's ISR expanded without a
pass over every partition the broker leads (issue 25): at each catch-up the round
checked them all, thousands, round after round while a restarted broker caught up.
Shrinks stay with the periodic round over every led partition (Kafka's
isr-expiration task)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio

from pybroker.config import BrokerConfig, TopicConfig
from pybroker.coordination.base import PartitionState, StateUpdate, VersionedState
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.log.partition import Partition
from pybroker.metrics import BrokerMetrics
from pybroker.purgatory import Purgatory
from pybroker.replica.isr import IsrManager
from pybroker.replica.partition import ReplicaPartition

LED = 40
VERSION = 5


class CountedPartition(ReplicaPartition):
    """A real partition that counts the ISR checks made of it."""

    checked = 0

    def isr_to_expand(self, alive: Any) -> list[int] | None:
        self.checked += 1
        return super().isr_to_expand(alive)


class Store:
    """The coordination store's side of an ISR write: every update is written."""

    def __init__(self) -> None:
        self.written: list[StateUpdate] = []

    async def update_partition_states(self, updates: list[StateUpdate], lease: object
                                      ) -> dict[tuple[str, int], int]:
        self.written += updates
        return {(u.topic, u.partition): u.expected_version + 1 for u in updates}

    async def notify_isr_change(self, written: list[tuple[str, int]]) -> None:
        pass


def test_a_catch_up_expands_that_partition_without_checking_the_others(tmp_path: Path
                                                                        ) -> None:
    purgatory = Purgatory()
    replicas = SimpleNamespace(partitions={}, on_isr_candidate=None)
    states: dict[tuple[str, int], VersionedState] = {}
    config = TopicConfig(BrokerConfig({}), {})
    isr = IsrManager(replicas, Store(), SimpleNamespace(  # type: ignore[arg-type]
        publisher=SimpleNamespace(metadata=SimpleNamespace(brokers={1: 0, 2: 0, 3: 0})),
        assignments={}, states=states), 60_000, BrokerMetrics())
    store: Store = isr.backend  # type: ignore[assignment]
    for index in range(LED):
        log = Partition("t", index, tmp_path / f"t-{index}", config, recovery_point=0,
                        log_start_offset=0, clean_shutdown=False)
        partition = CountedPartition(log, 1, purgatory,
                                     lambda *p: replicas.on_isr_candidate(*p))
        # broker 3 is out of every ISR (it was restarted), broker 2 keeps up
        partition.make_leader(PartitionState(leader=1, leader_epoch=3, replicas=[1, 2, 3],
                                             isr=[1, 2]), VERSION)
        replicas.partitions[("t", index)] = partition
        states[("t", index)] = VersionedState(
            LeaderAndIsr(controller_epoch=1, leader=1, leader_epoch=3, isr=[1, 2]), VERSION)
    caught_up = replicas.partitions[("t", 7)]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(isr.run)
            await anyio.sleep(0)
            # broker 3 fetches partition 7 from its log end: caught up
            caught_up.record_follower_fetch(3, caught_up.log_end_offset)
            with anyio.fail_after(30):
                while not store.written:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert [(u.topic, u.partition, u.state.isr) for u in store.written] == [("t", 7, [1, 2, 3])]
    assert caught_up.isr == [1, 2, 3]
    assert caught_up.checked == 1
    # no other partition was looked at (their follower 3 has not fetched)
    assert sum(p.checked for p in replicas.partitions.values()) == 1
    assert isr.full_rounds == 0
