"""Partition states written in batches (issue 25): one conditional, fenced write per
batch of states instead of one per partition, with each partition's own version still
checked. Run against the embedded backend and a real ZooKeeper; on ZooKeeper the
multis are counted at the client."""

from __future__ import annotations

import uuid

import pytest

from pybroker.coordination import zktopics
from pybroker.coordination.base import (
    ControllerLease,
    CoordinationBackend,
    StateUpdate,
    TopicAssignment,
)
from pybroker.coordination.errors import ControllerMoved, StaleVersion
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.errors import ErrorCode, KafkaError
from tests.coordination.conftest import Cluster, MultiCounter

pytestmark = pytest.mark.anyio

TOPICS = 3
PARTITIONS = 40


def state(leader: int, leader_epoch: int, isr: list[int], epoch: int) -> LeaderAndIsr:
    return LeaderAndIsr(controller_epoch=epoch, leader=leader, leader_epoch=leader_epoch,
                        isr=isr)


async def topics(client: CoordinationBackend, lease: ControllerLease) -> list[str]:
    names = [f"batch-{i}" for i in range(TOPICS)]
    for name in names:
        await client.create_topic(TopicAssignment(
            name=name, topic_id=uuid.uuid4(),
            partitions={p: [1, 2, 3] for p in range(PARTITIONS)}), {}, lease)
        await client.create_partition_states(
            name, {p: state(1, 0, [1, 2, 3], lease.epoch) for p in range(PARTITIONS)}, lease)
    return names


async def test_a_batch_moves_every_partition_in_few_multis(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zktopics, "STATE_OPS_PER_MULTI", 50)
    a = await cluster.client()
    lease = await a.try_elect_controller(1)
    assert lease is not None
    names = await topics(a, lease)
    counter = MultiCounter(a) if cluster.kind == "zookeeper" else None
    keys = [(n, p) for n in names for p in range(PARTITIONS)]
    current = await a.partition_states_of(keys + [("batch-0", 999), ("nothing", 0)])
    assert set(current) == set(keys)  # partitions without a state are left out

    moved = state(2, 1, [2, 3], lease.epoch)
    outcomes = await a.update_partition_states(
        [StateUpdate(n, p, moved, current[(n, p)].version) for n, p in keys], lease)
    assert outcomes == {k: current[k].version + 1 for k in keys}
    after = await a.partition_states_of(keys)
    assert all(v.state == moved for v in after.values())
    if counter is not None:
        # 120 states at 50 a multi: 3 multis, not 120
        assert counter.count == 3


async def test_a_stale_partition_does_not_cost_the_others_their_update(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zktopics, "STATE_OPS_PER_MULTI", 50)
    a, leader = await cluster.client(), await cluster.client()
    lease = await a.try_elect_controller(1)
    assert lease is not None
    names = await topics(a, lease)
    keys = [(n, p) for n in names for p in range(PARTITIONS)]
    current = await a.partition_states_of(keys)
    # two leaders changed their ISR since the controller read the states
    raced = [("batch-0", 7), ("batch-2", 30)]
    for topic, index in raced:
        await leader.update_partition_state(topic, index, state(1, 0, [1, 2], lease.epoch),
                                            current[(topic, index)].version, None)
    await a.delete_topic("batch-1", lease)

    moved = state(2, 1, [2, 3], lease.epoch)
    outcomes = await a.update_partition_states(
        [StateUpdate(n, p, moved, current[(n, p)].version) for n, p in keys], lease)
    for key in raced:
        assert isinstance(outcomes[key], StaleVersion)
    for p in range(PARTITIONS):
        error = outcomes[("batch-1", p)]
        assert isinstance(error, KafkaError)
        assert error.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    written = [k for k in keys if k not in raced and k[0] != "batch-1"]
    assert {k: outcomes[k] for k in written} == {k: current[k].version + 1 for k in written}
    after = await a.partition_states_of(keys)
    assert {k for k, v in after.items() if v.state == moved} == set(written)
    for key in raced:  # the leaders' writes stand
        assert after[key].state.isr == [1, 2] and after[key].state.leader_epoch == 0


async def test_a_deposed_controllers_batch_is_fenced(cluster: Cluster) -> None:
    a, b = await cluster.client(), await cluster.client()
    old = await a.try_elect_controller(1)
    assert old is not None
    names = await topics(a, old)
    keys = [(n, p) for n in names for p in range(PARTITIONS)]
    current = await a.partition_states_of(keys)
    await a.resign(old)
    new = await b.try_elect_controller(2)
    assert new is not None
    with pytest.raises(ControllerMoved):
        await a.update_partition_states(
            [StateUpdate(n, p, state(3, 1, [3], old.epoch), current[(n, p)].version)
             for n, p in keys], old)
    assert await b.partition_states_of(keys) == current
