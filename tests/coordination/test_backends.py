"""The behaviour every coordination backend shares, run against embedded and ZooKeeper."""

from __future__ import annotations

import uuid
import anyio
import pytest

from pybroker.coordination.base import (
    ControllerLease,
    CoordinationBackend,
    TopicAssignment,
    VersionedState,
)
from pybroker.coordination.errors import BrokerIdInUse, ControllerMoved, StaleVersion
from pybroker.coordination.znodes import RECOVERING, BrokerRegistration, LeaderAndIsr
from pybroker.errors import ErrorCode, KafkaError
from tests.coordination.conftest import Cluster, eventually

pytestmark = pytest.mark.anyio


def registration(port: int) -> BrokerRegistration:
    return BrokerRegistration.create([("PLAINTEXT", "127.0.0.1", port)])


def assignment(name: str, partitions: int = 2, topic_id: uuid.UUID | None = None,
               replicas: list[int] | None = None) -> TopicAssignment:
    return TopicAssignment(name=name, topic_id=topic_id or uuid.uuid4(),
                           partitions={p: list(replicas or [1]) for p in range(partitions)})


def state(leader: int, leader_epoch: int, isr: list[int], epoch: int) -> LeaderAndIsr:
    return LeaderAndIsr(controller_epoch=epoch, leader=leader, leader_epoch=leader_epoch,
                        isr=isr)


async def elect(client: CoordinationBackend, broker_id: int) -> ControllerLease:
    lease = await client.try_elect_controller(broker_id)
    assert lease is not None, f"broker {broker_id} lost an uncontested election"
    return lease


async def test_brokers_register_and_watch(cluster: Cluster) -> None:
    a, b = await cluster.client(), await cluster.client()
    seen: list[dict[int, BrokerRegistration]] = []
    handle = await a.watch_brokers(seen.append)
    assert seen == [{}]  # the current (empty) set is delivered before watch_brokers returns

    one, two = registration(9092), registration(9093)
    await a.register_broker(1, one)
    await b.register_broker(2, two)
    await eventually(lambda: seen[-1] == {1: one, 2: two}, "both brokers in the watch")
    assert await b.live_brokers() == {1: one, 2: two}

    with pytest.raises(BrokerIdInUse, match="/brokers/ids/1"):
        await b.register_broker(1, registration(9094))

    await b.unregister_broker(2)
    await eventually(lambda: seen[-1] == {1: one}, "broker 2 gone from the watch")
    handle.cancel()
    await b.register_broker(2, two)

    async def two_is_back() -> bool:
        return 2 in await a.live_brokers()

    await eventually(two_is_back, "broker 2 back")
    await a.settle()
    assert seen[-1] == {1: one}  # cancelled: no more callbacks


async def test_broker_epochs_grow_with_each_registration(cluster: Cluster) -> None:
    a, b = await cluster.client(), await cluster.client()
    first = await a.register_broker(1, registration(9092))
    other = await b.register_broker(2, registration(9093))
    assert await b.broker_epochs() == {1: first, 2: other}
    await a.unregister_broker(1)
    bounced = await a.register_broker(1, registration(9092))
    assert bounced > max(first, other)  # a bounced broker is told apart by its epoch
    assert await b.broker_epochs() == {1: bounced, 2: other}
    # one broker's alone, as a controlled shutdown reads it (both sides)
    assert await b.broker_epoch(1) == bounced
    assert await a.broker_epoch(2) == other
    await a.unregister_broker(1)
    assert await b.broker_epoch(1) is None


async def test_controller_election_increments_the_epoch(cluster: Cluster) -> None:
    a, b = await cluster.client(), await cluster.client()
    seen: list[int | None] = []
    await b.watch_controller(seen.append)
    assert seen == [None]

    first = await elect(a, 1)
    assert first.broker_id == 1
    assert await b.try_elect_controller(2) is None  # the seat is taken
    # asking again (say, after an answer lost to a timeout) gets the same lease back
    assert await a.try_elect_controller(1) == first
    assert await b.controller_id() == 1
    assert await b.controller_epoch() == (first.epoch, first.epoch_zk_version)
    await eventually(lambda: seen[-1] == 1, "the watch to see controller 1")

    await a.resign(first)
    await eventually(lambda: seen[-1] is None, "the watch to see no controller")
    second = await elect(b, 2)
    assert second.epoch == first.epoch + 1
    assert second.epoch_zk_version > first.epoch_zk_version
    await eventually(lambda: seen[-1] == 2, "the watch to see controller 2")

    await a.resign(first)  # a stale resignation must not remove the successor
    assert await a.controller_id() == 2


async def test_deposed_controller_writes_are_fenced(cluster: Cluster) -> None:
    a, b = await cluster.client(), await cluster.client()
    old = await elect(a, 1)
    t = assignment("fenced", partitions=1)
    await a.create_topic(t, {}, old)
    await a.create_partition_states("fenced", {0: state(1, 0, [1], old.epoch)}, old)
    await a.resign(old)
    new = await elect(b, 2)

    attempts = [
        a.create_topic(assignment("other"), {}, old),
        a.set_partition_assignment(assignment("fenced", 2, t.topic_id), old),
        a.update_partition_state("fenced", 0, state(1, 1, [1], old.epoch), 0, old),
        a.delete_topic("fenced", old),
    ]
    for attempt in attempts:
        with pytest.raises(ControllerMoved) as exc:
            await attempt
        assert exc.value.code is ErrorCode.NOT_CONTROLLER
    assert set(await b.topic_assignments()) == {"fenced"}
    assert len((await b.topic_assignments())["fenced"].partitions) == 1
    assert (await b.partition_states("fenced"))[0].version == 0

    # a write that forgets its lease fails instead of going out unfenced
    with pytest.raises(TypeError, match="lease"):
        await b.update_partition_state(  # type: ignore[call-arg]
            "fenced", 0, state(2, 1, [2], new.epoch), 0)
    with pytest.raises(TypeError, match="lease"):
        await b.create_topic(assignment("unleased"), {})  # type: ignore[call-arg]
    # the new controller's lease works
    version = await b.update_partition_state("fenced", 0, state(2, 1, [2], new.epoch), 0, new)
    assert version == 1
    await b.delete_topic("fenced", new)
    assert await b.topic_assignments() == {}


async def test_topic_lifecycle_with_watches(cluster: Cluster) -> None:
    a, b = await cluster.client(), await cluster.client()
    lease = await elect(a, 1)
    topics: list[dict[str, TopicAssignment]] = []
    configs: list[tuple[str, dict[str, str]]] = []
    deletions: list[set[str]] = []
    await b.watch_topics(topics.append)
    await b.watch_topic_configs(lambda name, cfg: configs.append((name, cfg)))
    await b.watch_topic_deletions(deletions.append)
    assert topics == [{}] and configs == [] and deletions == [set()]

    orders = assignment("orders", partitions=2, replicas=[1, 2])
    await a.create_topic(orders, {"retention.ms": "1000"}, lease)
    await eventually(lambda: topics[-1] == {"orders": orders}, "the new topic in the watch")
    assert await b.topic_configs("orders") == {"retention.ms": "1000"}
    with pytest.raises(KafkaError) as exc:
        await b.create_topic(assignment("orders"), {}, lease)
    assert exc.value.code is ErrorCode.TOPIC_ALREADY_EXISTS

    await b.set_topic_configs("orders", {"retention.ms": "2000", "cleanup.policy": "compact"})
    await eventually(lambda: configs == [
        ("orders", {"retention.ms": "2000", "cleanup.policy": "compact"})], "the config change")
    assert await a.topic_configs("orders") == {"retention.ms": "2000",
                                               "cleanup.policy": "compact"}

    grown = TopicAssignment(name="orders", topic_id=orders.topic_id,
                            partitions={0: [1, 2], 1: [1, 2], 2: [2, 1]})
    await a.set_partition_assignment(grown, lease)
    await eventually(lambda: topics[-1].get("orders") == grown, "the new partition")

    await b.request_topic_deletion("orders")
    await b.request_topic_deletion("orders")  # a second request is no error
    await eventually(lambda: deletions[-1] == {"orders"}, "the deletion request")
    assert await a.topics_pending_deletion() == {"orders"}

    await a.delete_topic("orders", lease)
    await eventually(lambda: topics[-1] == {}, "the topic gone from the watch")
    await eventually(lambda: deletions[-1] == set(), "the deletion mark gone")
    assert await a.topic_configs("orders") == {}

    for call in (b.set_topic_configs("orders", {}), b.request_topic_deletion("orders"),
                 a.delete_topic("orders", lease),
                 a.set_partition_assignment(grown, lease)):
        with pytest.raises(KafkaError) as exc:
            await call
        assert exc.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_invalid_assignments_are_refused(cluster: Cluster) -> None:
    a = await cluster.client()
    bad = [
        TopicAssignment(name="gap", topic_id=uuid.uuid4(), partitions={0: [1], 2: [1]}),
        TopicAssignment(name="dup", topic_id=uuid.uuid4(), partitions={0: [1, 1]}),
        TopicAssignment(name="none", topic_id=uuid.uuid4(), partitions={0: []}),
    ]
    for topic in bad:
        with pytest.raises(KafkaError) as exc:
            await a.create_topic(topic, {}, lease=None)
        assert exc.value.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    with pytest.raises(KafkaError) as exc:
        await a.create_topic(assignment("bad/name"), {}, lease=None)
    assert exc.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert await a.topic_assignments() == {}


async def test_partition_state_updates_are_conditional(cluster: Cluster) -> None:
    a, b = await cluster.client(), await cluster.client()
    lease = await elect(a, 1)
    seen: list[tuple[str, int, VersionedState | None]] = []
    await b.watch_partition_states(
        lambda t, changes: seen.extend((t, p, s) for p, s in changes.items()))
    assert seen == []

    await a.create_topic(assignment("p", partitions=2, replicas=[1, 2]), {}, lease)
    initial = {0: state(1, 0, [1, 2], lease.epoch), 1: state(2, 0, [2, 1], lease.epoch)}
    assert await a.create_partition_states("p", initial, lease) == {0: 0, 1: 0}
    with pytest.raises(StaleVersion):
        await a.create_partition_states("p", {0: initial[0]}, lease)
    await eventually(lambda: {(t, p): s for t, p, s in seen} == {
        ("p", 0): VersionedState(initial[0], 0), ("p", 1): VersionedState(initial[1], 0)},
        "both initial states in the watch")
    assert await b.partition_states("p") == {0: VersionedState(initial[0], 0),
                                             1: VersionedState(initial[1], 0)}

    # the leader shrinks its ISR (no lease), conditional on the version it knows
    shrunk = state(1, 0, [1], lease.epoch)
    assert await b.update_partition_state("p", 0, shrunk, 0, lease=None) == 1
    with pytest.raises(StaleVersion) as stale:
        await b.update_partition_state("p", 0, state(1, 0, [1, 2], lease.epoch), 0,
                                       lease=None)
    assert stale.value.expected_version == 0
    # the controller elects a new leader, fenced and conditional
    unclean = LeaderAndIsr(controller_epoch=lease.epoch, leader=2, leader_epoch=1, isr=[2],
                           leader_recovery_state=RECOVERING)
    assert await a.update_partition_state("p", 0, unclean, 1, lease) == 2
    with pytest.raises(StaleVersion):
        await a.update_partition_state("p", 0, shrunk, 1, lease)
    await eventually(lambda: seen[-1] == ("p", 0, VersionedState(unclean, 2)),
                     "the controller's update in the watch")
    assert (await b.partition_states("p"))[0].state.recovery_state == RECOVERING

    with pytest.raises(KafkaError) as exc:
        await b.update_partition_state("p", 7, shrunk, 0, lease=None)
    assert exc.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    await a.delete_topic("p", lease)
    await eventually(lambda: {(t, p) for t, p, s in seen[-2:] if s is None} == {
        ("p", 0), ("p", 1)}, "the deleted states in the watch")
    assert await b.partition_states("p") == {}


async def test_producer_id_blocks_are_unique_across_clients(cluster: Cluster) -> None:
    a, b = await cluster.client(), await cluster.client()
    blocks: list[range] = []

    async def allocate(client: CoordinationBackend, broker_id: int) -> None:
        for _ in range(8):
            blocks.append(await client.allocate_producer_ids(broker_id))

    async with anyio.create_task_group() as tg:
        tg.start_soon(allocate, a, 1)
        tg.start_soon(allocate, b, 2)
    assert all(len(block) == 1000 for block in blocks)
    ordered = sorted(blocks, key=lambda r: r.start)
    assert ordered[0].start == 0
    for before, after in zip(ordered, ordered[1:], strict=False):
        assert after.start == before.stop  # disjoint and contiguous: no id handed out twice


async def test_isr_change_notifications(cluster: Cluster) -> None:
    leader, controller = await cluster.client(), await cluster.client()
    fired: list[int] = []
    await controller.watch_isr_changes(lambda: fired.append(1))
    assert fired == []
    await leader.notify_isr_change([("t", 0), ("t", 1)])
    await leader.notify_isr_change([("u", 3)])
    await eventually(lambda: bool(fired), "the ISR change watch")
    got: set[tuple[str, int]] = set()

    async def all_consumed() -> bool:
        got.update(await controller.consume_isr_changes())
        return got == {("t", 0), ("t", 1), ("u", 3)}

    await eventually(all_consumed, "the notified partitions")
    assert await controller.consume_isr_changes() == set()


async def test_cluster_id_is_shared_and_kept(cluster: Cluster) -> None:
    a, b = await cluster.client(), await cluster.client()
    assert len(a.cluster_id) == 22
    assert a.cluster_id == b.cluster_id
