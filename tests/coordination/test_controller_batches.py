"""The controller writes partition states in batches (issue 25): a controlled shutdown
or a broker's death moves N partitions with about N / batch ZooKeeper multis, not N,
and the fences stay per partition: leader epochs go up by exactly one where the
leader changed, a partition whose state changed under the controller is decided again
from what is stored, and no state names the broker afterwards. With the real
controller on a real ZooKeeper (three sessions: three brokers); the multis are counted
at the controller's client."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.controller import controller as controller_module
from pybroker.controller.controller import PREFERRED, Controller
from pybroker.coordination import zktopics
from pybroker.coordination import znodes as zn
from pybroker.coordination.base import (
    CoordinationBackend,
    StateUpdate,
    TopicAssignment,
    VersionedState,
)
from pybroker.coordination.znodes import BrokerRegistration, LeaderAndIsr
from tests.coordination.conftest import Cluster, MultiCounter, eventually

pytestmark = pytest.mark.anyio

TOPICS = 4
PARTITIONS = 50
BATCH = 50
BROKERS = (1, 2, 3)


def replicas(index: int) -> list[int]:
    """RF 3 over brokers 1-3, the preferred leader rotating: each leads a third."""
    first = index % 3
    return [BROKERS[(first + k) % 3] for k in range(3)]


class Setup:
    def __init__(self, controller: Controller, backend: CoordinationBackend,
                 others: dict[int, CoordinationBackend], epochs: dict[int, int]) -> None:
        self.controller = controller
        self.backend = backend
        self.others = others
        self.epochs = epochs
        self.names = [f"moved-{i}" for i in range(TOPICS)]
        self.keys = [(n, p) for n in self.names for p in range(PARTITIONS)]

    async def states(self) -> dict[tuple[str, int], VersionedState]:
        return await self.backend.partition_states_of(self.keys)


async def idle(stream: Any) -> None:
    async with stream:
        await anyio.sleep_forever()


@asynccontextmanager
async def running(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Setup]:
    """Brokers 1-3 registered, each with a listener that accepts connections (the
    controller watches them: a refused one is a dead broker); broker 1 controller."""
    async with anyio.create_task_group() as tg:
        epochs: dict[int, int] = {}
        clients: dict[int, CoordinationBackend] = {}
        for broker in BROKERS:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
            tg.start_soon(listener.serve, idle)
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            clients[broker] = await cluster.client()
            epochs[broker] = await clients[broker].register_broker(
                broker, BrokerRegistration.create([("PLAINTEXT", "127.0.0.1", port)]))
        backend = clients.pop(1)
        controller = Controller(1, backend, BrokerConfig({"log.dirs": str(tmp_path),
                                                          "broker.id": "1"}))
        setup = Setup(controller, backend, clients, epochs)
        tg.start_soon(controller.run)
        await eventually(lambda: controller.is_active, "the controller elected")
        await eventually(lambda: controller._live == set(BROKERS), "every broker seen live")
        for name in setup.names:
            await backend.create_topic(TopicAssignment(
                name=name, topic_id=uuid.uuid4(),
                partitions={p: replicas(p) for p in range(PARTITIONS)}), {}, None)

        async def all_led() -> bool:
            states = await setup.states()
            return len(states) == len(setup.keys) and all(
                s.state.isr == replicas(p) for (_, p), s in states.items())

        await eventually(all_led, "every partition led with a full ISR")
        await backend.settle()
        try:
            yield setup
        finally:
            tg.cancel_scope.cancel()


def check_without(broker: int, before: dict[tuple[str, int], VersionedState],
                  after: dict[tuple[str, int], VersionedState], fenced: set[Any]) -> None:
    """No state names `broker`; leader epochs went up by exactly one where it led
    (and stayed where it did not); every other replica stays in the ISR."""
    assert set(after) == set(before)
    for key, old in before.items():
        new = after[key].state
        assert new.leader != broker and broker not in new.isr, (key, new)
        if old.state.leader == broker:
            assert new.leader_epoch == old.state.leader_epoch + 1, (key, old, new)
            assert new.leader in old.state.isr
        else:
            assert new.leader == old.state.leader and new.leader_epoch == old.state.leader_epoch
        expected_isr = [r for r in old.state.isr if r != broker]
        if key not in fenced:
            assert new.isr == expected_isr, (key, new)


@pytest.mark.parametrize("backend_kind", ["zookeeper"])
async def test_controlled_shutdown_moves_partitions_in_batches(
        cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zktopics, "STATE_OPS_PER_MULTI", BATCH)
    async with running(cluster, tmp_path) as setup:
        before = await setup.states()
        assert any(s.state.leader == 2 for s in before.values())
        counter = MultiCounter(setup.backend)

        remaining = await setup.controller.controlled_shutdown(2, setup.epochs[2])

        assert remaining == []
        # broker 2 is in all 200 partitions' ISRs: 200 state changes, in multis of the
        # moves, then of the ISR changes (5 here: 67 and 133 of them)
        led = sum(s.state.leader == 2 for s in before.values())
        assert counter.count <= math.ceil(led / BATCH) + math.ceil(
            (len(setup.keys) - led) / BATCH), counter.count
        check_without(2, before, await setup.states(), set())


@pytest.mark.parametrize("backend_kind", ["zookeeper"])
async def test_controlled_shutdown_writes_the_leaderships_before_the_isrs(
        cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every multi moving a leadership is sent before any that only takes the broker out
    of an ISR (Kafka's order: the elections, then the replicas offline), so the
    leaderships have moved after a third of the writes at RF 3, not as the last topic's
    are written; the states end the same."""
    monkeypatch.setattr(zktopics, "STATE_OPS_PER_MULTI", BATCH)
    async with running(cluster, tmp_path) as setup:
        before = await setup.states()
        led = {zn.partition_state_path(t, p) for (t, p), s in before.items()
               if s.state.leader == 2}
        assert 0 < len(led) < len(before)
        sent: list[list[str]] = []  # each multi's state paths, in the order sent
        kazoo = setup.backend.zk.kazoo  # type: ignore[attr-defined]
        call, chroot = kazoo._call, kazoo.chroot or ""

        def recorded(request: Any, async_object: Any) -> Any:
            if request.type == MultiCounter.MULTI:
                sent.append([path[len(chroot):] for path, _, _ in request.writes])
            return call(request, async_object)

        kazoo._call = recorded
        write = setup.backend.update_partition_states
        calls: list[str] = []

        async def writing(updates: Any, lease: Any = None) -> Any:
            calls.append(f"sent {len(updates)}")
            outcomes = await write(updates, lease)
            calls.append("answered")
            return outcomes

        setup.backend.update_partition_states = writing  # type: ignore[method-assign]

        remaining = await setup.controller.controlled_shutdown(2, setup.epochs[2])

        assert remaining == []
        # the ISR changes are sent once the moves are answered (a standalone ZooKeeper
        # serves the brokers' re-reads after the writes queued before them)
        assert calls == [f"sent {len(led)}", "answered", f"sent {len(before) - len(led)}",
                         "answered"], calls
        order = [path in led for multi in sent for path in multi]
        assert sorted(order, reverse=True) == order, [sum(m in led for m in x) for x in sent]
        assert sum(order) == len(led) and len(order) == len(before)
        # the moves fill whole multis before the first ISR-only one
        assert len(sent) <= math.ceil(len(led) / BATCH) + math.ceil(
            (len(before) - len(led)) / BATCH)
        check_without(2, before, await setup.states(), set())


@pytest.mark.parametrize("backend_kind", ["zookeeper"])
async def test_a_state_changed_meanwhile_is_decided_again_not_lost(
        cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader changes one partition's ISR between the controller's read and its batch
    write: that multi fails on the partition's version; the batch's other partitions are
    still written, and the raced one is read again and decided from the stored state."""
    monkeypatch.setattr(zktopics, "STATE_OPS_PER_MULTI", BATCH)
    async with running(cluster, tmp_path) as setup:
        before = await setup.states()
        # a partition broker 3 leads and broker 2 follows; its leader drops broker 1
        raced = next(k for k, s in before.items() if s.state.leader == 3)
        leader = setup.others[3]
        write = setup.backend.update_partition_states
        raced_once: list[int] = []

        async def racing(updates: Any, lease: Any = None) -> Any:
            if not raced_once:
                old = before[raced]
                shrunk = LeaderAndIsr(controller_epoch=old.state.controller_epoch, leader=3,
                                      leader_epoch=old.state.leader_epoch,
                                      isr=[r for r in old.state.isr if r != 1])
                raced_once.append(await leader.update_partition_state(
                    raced[0], raced[1], shrunk, old.version, None))
            return await write(updates, lease)

        setup.backend.update_partition_states = racing  # type: ignore[method-assign]
        remaining = await setup.controller.controlled_shutdown(2, setup.epochs[2])

        assert raced_once and remaining == []
        after = await setup.states()
        check_without(2, before, after, {raced})
        # the leader's change stands, and the controller's was made on top of it
        assert after[raced].state.isr == [r for r in before[raced].state.isr if r not in (1, 2)]
        assert after[raced].version == before[raced].version + 2


@pytest.mark.parametrize("backend_kind", ["zookeeper"])
async def test_controlled_shutdown_decides_from_the_states_the_broker_holds(
        cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Given the states its broker's listener holds (with their versions), a controlled
    shutdown reads none back before writing; one the listener holds stale (a leader
    changed its ISR since) fails its conditional write and is read and decided again
    from the store, and one it lacks is read: every state ends as when all were read."""
    monkeypatch.setattr(zktopics, "STATE_OPS_PER_MULTI", BATCH)
    async with running(cluster, tmp_path) as setup:
        before = await setup.states()
        raced = next(k for k, s in before.items() if s.state.leader == 3)
        lacking = next(k for k, s in before.items() if s.state.leader == 2)
        old = before[raced]
        shrunk = LeaderAndIsr(controller_epoch=old.state.controller_epoch, leader=3,
                              leader_epoch=old.state.leader_epoch,
                              isr=[r for r in old.state.isr if r != 1])
        assert isinstance(await setup.others[3].update_partition_state(
            raced[0], raced[1], shrunk, old.version, None), int)
        setup.controller.known_states = lambda: {k: v for k, v in before.items()
                                                 if k != lacking}
        read: list[list[tuple[str, int]]] = []
        reader = setup.backend.partition_states_of

        async def reading(partitions: Any) -> Any:
            wanted = list(partitions)
            read.append(wanted)
            return await reader(wanted)

        setup.backend.partition_states_of = reading  # type: ignore[method-assign]
        remaining = await setup.controller.controlled_shutdown(2, setup.epochs[2])

        assert remaining == []
        # the one it lacked, then the stale one again: never the 200
        assert read == [[lacking], [raced]], read
        setup.backend.partition_states_of = reader  # type: ignore[method-assign]
        after = await setup.states()
        check_without(2, before, after, {raced})
        assert after[raced].state.isr == [r for r in old.state.isr if r not in (1, 2)]


@pytest.mark.parametrize("backend_kind", ["zookeeper"])
async def test_a_dead_brokers_partitions_move_in_batches(
        cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zktopics, "STATE_OPS_PER_MULTI", BATCH)
    async with running(cluster, tmp_path) as setup:
        before = await setup.states()
        counter = MultiCounter(setup.backend)

        await setup.others[2].close()  # its session ends: the registration goes

        async def moved() -> bool:
            states = await setup.states()
            return all(s.state.leader != 2 and 2 not in s.state.isr for s in states.values())

        await eventually(moved, "every partition without broker 2")
        await setup.backend.settle()
        check_without(2, before, await setup.states(), set())
        # one leader per partition, never two: each led partition was written once
        assert counter.count <= math.ceil(len(setup.keys) / BATCH), counter.count


@pytest.mark.parametrize("backend_kind", ["zookeeper"])
async def test_preferred_elections_go_in_batches(
        cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ElectLeaders (and the automatic rebalance) over partitions led by a replica that is
    not the preferred one: every preferred replica elected, epochs up by one, in
    about N / batch multis."""
    monkeypatch.setattr(zktopics, "STATE_OPS_PER_MULTI", BATCH)
    async with running(cluster, tmp_path) as setup:
        current = await setup.states()
        lease = setup.controller.lease
        assert lease is not None
        # as after a broker's return: the second replica leads, every replica in sync
        misled = {k: LeaderAndIsr(controller_epoch=lease.epoch, leader=replicas(k[1])[1],
                                  leader_epoch=v.state.leader_epoch + 1, isr=replicas(k[1]))
                  for k, v in current.items()}
        outcomes = await setup.backend.update_partition_states(
            [StateUpdate(t, p, misled[(t, p)], current[(t, p)].version) for t, p in setup.keys],
            lease)
        assert all(isinstance(o, int) for o in outcomes.values())
        before = await setup.states()
        counter = MultiCounter(setup.backend)

        results = await setup.controller.elect_leaders(PREFERRED, None)

        assert {k: results[k] for k in setup.keys} == dict.fromkeys(setup.keys)
        assert counter.count <= math.ceil(len(setup.keys) / BATCH), counter.count
        after = await setup.states()
        for key, old in before.items():
            assert after[key].state.leader == replicas(key[1])[0]
            assert after[key].state.leader_epoch == old.state.leader_epoch + 1
            assert after[key].state.isr == old.state.isr


@pytest.mark.parametrize("backend_kind", ["zookeeper"])
async def test_a_pass_writes_its_first_chunks_while_the_rest_is_read(
        cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reconcile pass over many topics goes in chunks of topics, every chunk's read
    sent at once: a chunk's writes are sent as soon as its states are decided, before
    the later chunks' states are taken in (ZooKeeper writes while the controller
    decodes), and every partition still ends as a single pass would leave it."""
    monkeypatch.setattr(controller_module, "RECONCILE_CHUNK_PARTITIONS", PARTITIONS)
    async with running(cluster, tmp_path) as setup:
        before = await setup.states()
        events: list[str] = []
        read, write = setup.backend.partition_states_of, setup.backend.update_partition_states

        async def reading(partitions: Any) -> Any:
            wanted = list(partitions)
            events.append("read sent")
            result = await read(wanted)
            events.append("read done")
            return result

        async def writing(updates: Any, lease: Any = None) -> Any:
            events.append("write sent")
            return await write(updates, lease)

        setup.backend.partition_states_of = reading  # type: ignore[method-assign]
        setup.backend.update_partition_states = writing  # type: ignore[method-assign]

        await setup.others[2].close()  # its session ends: the registration goes

        async def moved() -> bool:
            states = await read(setup.keys)
            return all(s.state.leader != 2 and 2 not in s.state.isr for s in states.values())

        await eventually(moved, "every partition without broker 2")
        await setup.backend.settle()
        check_without(2, before, await read(setup.keys), set())
        # one chunk per topic: every read sent before the first answer, and the first
        # write sent before the last chunk's states were taken in
        pass_events = events[:events.index("write sent") + 1]
        assert pass_events[:TOPICS] == ["read sent"] * TOPICS, events
        assert pass_events.count("read done") < TOPICS, events
