"""A broker's view of every partition state over ZooKeeper (issue 25): persistent
recursive watches, the changed states re-read in multiReads (coordination/
zkstatewatch.py). Against a real ZooKeeper, with the watching client's requests
counted at kazoo: a batch of changes costs it a few multiReads, not a getData per
state; and it sees every change, also one made between a notification and its
re-read, across a reconnect and after its session expired."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import anyio
import pytest
from kazoo.exceptions import UnimplementedError
from kazoo.protocol.serialization import GetData

from pybroker.coordination import zkstatewatch
from pybroker.coordination.base import (
    ControllerLease,
    CoordinationBackend,
    StateUpdate,
    TopicAssignment,
    VersionedState,
)
from pybroker.coordination.zkmultiread import MultiRead
from pybroker.coordination.zookeeper import ZooKeeperBackend
from pybroker.coordination.znodes import LeaderAndIsr
from tests.cluster.proxy import Proxy
from tests.cluster.zookeeper import ZooKeeperServer
from tests.coordination.conftest import Cluster, eventually

pytestmark = pytest.mark.anyio

TOPICS = 3
PARTITIONS = 40

Key = tuple[str, int]


def state(leader: int, leader_epoch: int, isr: list[int], epoch: int) -> LeaderAndIsr:
    return LeaderAndIsr(controller_epoch=epoch, leader=leader, leader_epoch=leader_epoch,
                        isr=isr)


async def create(client: CoordinationBackend, lease: ControllerLease, name: str) -> None:
    await client.create_topic(TopicAssignment(
        name=name, topic_id=uuid.uuid4(),
        partitions={p: [1, 2, 3] for p in range(PARTITIONS)}), {}, lease)
    await client.create_partition_states(
        name, {p: state(1, 0, [1, 2, 3], lease.epoch) for p in range(PARTITIONS)}, lease)


class View:
    """What a broker's listener is handed: every state, newest first."""

    def __init__(self) -> None:
        self.states: dict[Key, VersionedState] = {}
        self.history: dict[Key, list[int]] = {}

    def changed(self, topic: str, changes: dict[int, VersionedState | None]) -> None:
        for partition, value in changes.items():
            if value is None:
                self.states.pop((topic, partition), None)
            else:
                self.states[(topic, partition)] = value
                self.history.setdefault((topic, partition), []).append(value.version)


class Requests:
    """Counts the requests a kazoo client sends, by request type."""

    def __init__(self, client: CoordinationBackend) -> None:
        assert isinstance(client, ZooKeeperBackend)
        self.by_type: Counter[int] = Counter()
        kazoo = client.zk.kazoo
        call = kazoo._call

        def counted(request: Any, async_object: Any) -> Any:
            self.by_type[request.type] += 1
            return call(request, async_object)

        kazoo._call = counted


async def matches_store(view: View, store: CoordinationBackend, keys: list[Key]) -> bool:
    actual = await store.partition_states_of(keys)
    return {k: v for k in keys if (v := view.states.get(k)) is not None} == actual


async def setup(zk_cluster: Cluster, names: list[str], connect: str | None = None
                ) -> tuple[CoordinationBackend, ControllerLease, CoordinationBackend, View]:
    controller = await zk_cluster.client()
    lease = await controller.try_elect_controller(1)
    assert lease is not None
    for name in names:
        await create(controller, lease, name)
    broker = await zk_cluster.client(connect)
    view = View()
    await broker.watch_partition_states(view.changed)
    assert len(view.states) == len(names) * PARTITIONS  # given before the watch returns
    return controller, lease, broker, view


async def test_a_batch_of_state_changes_costs_a_watching_broker_a_few_multireads(
        zk_cluster: Cluster) -> None:
    names = [f"w-{i}" for i in range(TOPICS)]
    controller, lease, broker, view = await setup(zk_cluster, names)
    keys = [(n, p) for n in names for p in range(PARTITIONS)]
    current = await controller.partition_states_of(keys)
    requests = Requests(broker)

    moved = state(2, 1, [2, 3], lease.epoch)
    await controller.update_partition_states(
        [StateUpdate(n, p, moved, current[(n, p)].version) for n, p in keys], lease)
    await eventually(lambda: all(view.states[k].state == moved for k in keys),
                     "every change seen by the watching broker")
    # one watch notification per state, but no read per state: the changed states are
    # read together (one standard watch per state cost 120 getData requests)
    assert requests.by_type[GetData.type] == 0
    assert 1 <= requests.by_type[MultiRead.type] <= 6, requests.by_type
    assert await matches_store(view, controller, keys)


async def test_kazoo_does_not_handle_again_what_only_the_recursive_watch_wants(
        zk_cluster: Cluster) -> None:
    """A state change under a broker's recursive watch is decoded once: kazoo's own
    notification handling (which would decode it again to find no standard watch to
    fire) is skipped; 30,000 of them when a controller moves a dead broker's partitions
    (issue 25)."""
    names = [f"k-{i}" for i in range(TOPICS)]
    controller, lease, broker, view = await setup(zk_cluster, names)
    assert isinstance(broker, ZooKeeperBackend)
    tap = broker.zk._event_tap  # type: ignore[attr-defined]
    handled_by_kazoo: list[bytes] = []
    kazoos = tap._kazoos

    def counted(buffer: bytes, offset: int) -> Any:
        handled_by_kazoo.append(buffer)
        return kazoos(buffer, offset)

    tap._kazoos = counted
    keys = [(n, p) for n in names for p in range(PARTITIONS)]
    current = await controller.partition_states_of(keys)
    moved = state(2, 1, [2, 3], lease.epoch)
    await controller.update_partition_states(
        [StateUpdate(n, p, moved, current[(n, p)].version) for n, p in keys], lease)
    await eventually(lambda: all(view.states[k].state == moved for k in keys),
                     "every change seen by the watching broker")
    assert handled_by_kazoo == []


async def test_a_standard_watch_under_a_recursive_one_still_fires(
        zk_cluster: Cluster) -> None:
    """The server sends one notification for a connection's standard and recursive
    watches on a znode together: kazoo still gets it when it holds a standard watch
    there (a data watch on a change, a child watch on a deletion)."""
    names = ["s-0"]
    controller, lease, broker, view = await setup(zk_cluster, names)
    assert isinstance(broker, ZooKeeperBackend)
    fired: list[Any] = []
    path = f"/brokers/topics/{names[0]}/partitions/0/state"
    broker.zk.kazoo.get(path, watch=fired.append)
    gone = f"/brokers/topics/{names[0]}/partitions/1/state"
    broker.zk.kazoo.get_children(gone, watch=fired.append)
    current = await controller.partition_states_of([(names[0], 0)])
    moved = state(2, 1, [2, 3], lease.epoch)
    await controller.update_partition_states(
        [StateUpdate(names[0], 0, moved, current[(names[0], 0)].version)], lease)
    await eventually(lambda: view.states[(names[0], 0)].state == moved,
                     "the change seen by the recursive watch")
    await eventually(lambda: len(fired) == 1, "the standard data watch fired")
    assert fired[0].type == "CHANGED" and fired[0].path == path
    assert isinstance(controller, ZooKeeperBackend)
    await controller.zk.call("delete", gone)
    await eventually(lambda: (names[0], 1) not in view.states,
                     "the deletion seen by the recursive watch")
    await eventually(lambda: len(fired) == 2, "the standard child watch fired")
    assert fired[1].type == "DELETED" and fired[1].path == gone


async def test_a_change_between_the_notification_and_the_reread_is_seen(
        zk_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    controller, lease, broker, view = await setup(zk_cluster, ["gap"])
    key = ("gap", 7)
    version = (await controller.partition_states_of([key]))[key].version
    reads = 0
    get_many = zkstatewatch.get_many

    async def racing(zk: Any, paths: list[str]) -> Any:
        # the first re-read: the state changes once before it is sent and once after
        # its answer, before anything else runs on the watching broker
        nonlocal reads, version
        reads += 1
        if reads == 1:
            version = await controller.update_partition_state(
                "gap", 7, state(2, 2, [2, 3], lease.epoch), version, lease)
        answer = await get_many(zk, paths)
        if reads == 1:
            version = await controller.update_partition_state(
                "gap", 7, state(3, 3, [3], lease.epoch), version, lease)
        return answer

    monkeypatch.setattr(zkstatewatch, "get_many", racing)
    version = await controller.update_partition_state(
        "gap", 7, state(2, 1, [2, 3], lease.epoch), version, lease)
    await eventually(lambda: view.states[key].state.leader == 3,
                     "the change made after the re-read")
    assert view.states[key].version == version == 3
    assert view.history[key] == sorted(view.history[key])  # never back in time
    assert await matches_store(view, controller, [("gap", p) for p in range(PARTITIONS)])


async def test_every_change_made_while_the_session_expired_is_seen(
        zk_cluster: Cluster, zookeeper: ZooKeeperServer) -> None:
    with Proxy((zookeeper.host, zookeeper.port)) as proxy:
        controller, lease, broker, view = await setup(
            zk_cluster, ["a", "b"], f"{proxy.address}{zk_cluster.chroot}")
        lost: list[str] = []
        broker.on_session_lost(lambda: lost.append("lost"))
        back: list[str] = []
        broker.on_session_reestablished(lambda: back.append("back"))
        proxy.cut("freeze")
        await eventually(lambda: lost == ["lost"], "the broker's session presumed expired")
        # meanwhile: states change, a topic goes, another comes
        keys = [("a", p) for p in range(PARTITIONS)]
        current = await controller.partition_states_of(keys)
        await controller.update_partition_states(
            [StateUpdate("a", p, state(2, 1, [2], lease.epoch), current[("a", p)].version)
             for p in range(0, PARTITIONS, 3)], lease)
        await controller.delete_topic("b", lease)
        await create(controller, lease, "c")
        proxy.restore()
        await eventually(lambda: back == ["back"], "a new session")
        every = [(n, p) for n in ("a", "b", "c") for p in range(PARTITIONS)]
        await eventually(lambda: matches_store(view, controller, every),
                         "the broker's view equal to ZooKeeper's")
        assert set(view.states) == set(await controller.partition_states_of(every))
        # and the watches are back: a change after the new session is seen
        key = ("c", 5)
        version = (await controller.partition_states_of([key]))[key].version
        await controller.update_partition_state("c", 5, state(3, 1, [3], lease.epoch),
                                                version, lease)
        await eventually(lambda: view.states[key].state.leader == 3,
                         "a change after the new session")


async def test_changes_during_a_short_disconnect_are_seen(
        zk_cluster: Cluster, zookeeper: ZooKeeperServer) -> None:
    with Proxy((zookeeper.host, zookeeper.port)) as proxy:
        controller, lease, broker, view = await setup(
            zk_cluster, ["a"], f"{proxy.address}{zk_cluster.chroot}")
        assert isinstance(broker, ZooKeeperBackend)
        session = broker.session_id
        keys = [("a", p) for p in range(PARTITIONS)]
        proxy.cut("drop")
        current = await controller.partition_states_of(keys)
        await controller.update_partition_states(
            [StateUpdate("a", p, state(2, 1, [2], lease.epoch), current[k].version)
             for (_, p), k in zip(keys, keys, strict=True)], lease)
        await anyio.sleep(0.3)
        proxy.restore()
        await eventually(lambda: broker.zk.kazoo.connected, "the reconnect")
        assert broker.session_id == session  # the same session: only the watches were lost
        await eventually(lambda: matches_store(view, controller, keys),
                         "the changes made while disconnected")
        current = await controller.partition_states_of(keys)
        await controller.update_partition_state("a", 1, state(3, 2, [3], lease.epoch),
                                                current[("a", 1)].version, lease)
        await eventually(lambda: view.states[("a", 1)].state.leader == 3,
                         "a change after the reconnect")


async def test_a_deleted_and_recreated_topic(zk_cluster: Cluster) -> None:
    controller, lease, broker, view = await setup(zk_cluster, ["gone"])
    await controller.delete_topic("gone", lease)
    await eventually(lambda: not view.states, "the deleted topic's states reported gone")
    await create(controller, lease, "gone")
    keys = [("gone", p) for p in range(PARTITIONS)]
    await eventually(lambda: matches_store(view, controller, keys), "the new topic's states")


async def test_without_persistent_watches_a_watch_per_state(
        zk_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    async def unimplemented(zk: Any, path: str) -> None:  # as ZooKeeper before 3.6
        raise UnimplementedError()

    monkeypatch.setattr(zkstatewatch, "add_recursive_watch", unimplemented)
    controller, lease, broker, view = await setup(zk_cluster, ["old"])
    keys = [("old", p) for p in range(PARTITIONS)]
    requests = Requests(broker)
    current = await controller.partition_states_of(keys)
    await controller.update_partition_states(
        [StateUpdate("old", p, state(2, 1, [2], lease.epoch), current[k].version)
         for (_, p), k in zip(keys, keys, strict=True)], lease)
    await eventually(lambda: matches_store(view, controller, keys), "every change")
    assert requests.by_type[GetData.type] == PARTITIONS  # each state re-read, re-armed
    await create(controller, lease, "new")
    await eventually(lambda: matches_store(view, controller, [("new", p) for p in
                                                              range(PARTITIONS)]),
                     "a new topic's states")
