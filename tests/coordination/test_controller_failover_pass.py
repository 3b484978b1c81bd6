"""A new controller after the old one was killed (issue 25): the dead controller's
registration outlives its process (its session has not expired), but its listener
refuses connections. The new controller looks at every broker's listener before its
first pass over the partitions, so that pass already moves the dead broker's
leaderships and ISR places: every state is read once, not once to find nothing to do
and again once the broker is found gone. With the real controller on a real ZooKeeper."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.controller import liveness
from pybroker.controller.controller import Controller
from pybroker.coordination.base import CoordinationBackend, TopicAssignment
from pybroker.coordination.znodes import BrokerRegistration, LeaderAndIsr
from tests.coordination.conftest import Cluster, eventually

pytestmark = pytest.mark.anyio

PARTITIONS = 30
BROKERS = (1, 2, 3)


def replicas(index: int) -> list[int]:
    return [BROKERS[(index + k) % 3] for k in range(3)]


async def idle(stream: Any) -> None:
    async with stream:
        await anyio.sleep_forever()


@pytest.mark.parametrize("backend_kind", ["zookeeper"])
async def test_first_pass_of_a_new_controller_elects_for_a_dead_registered_broker(
        cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a refusal is confirmed after this pause: the first pass would begin well before
    # broker 3 is found gone if it did not wait for the first looks
    monkeypatch.setattr(liveness, "CONFIRM_S", 0.3)
    async with anyio.create_task_group() as tg:
        clients: dict[int, CoordinationBackend] = {}
        dead = await anyio.create_tcp_listener(local_host="127.0.0.1")
        dead_port = dead.extra(anyio.abc.SocketAttribute.local_port)
        for broker in BROKERS:
            if broker == 3:
                port = dead_port
            else:
                listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
                tg.start_soon(listener.serve, idle)
                port = listener.extra(anyio.abc.SocketAttribute.local_port)
            clients[broker] = await cluster.client()
            await clients[broker].register_broker(
                broker, BrokerRegistration.create([("PLAINTEXT", "127.0.0.1", port)]))
        # the states as the killed controller (broker 3) left them: full ISRs
        lease = await clients[3].try_elect_controller(3)
        assert lease is not None
        name = "failover-pass"
        await clients[3].create_topic(TopicAssignment(
            name=name, topic_id=uuid.uuid4(),
            partitions={p: replicas(p) for p in range(PARTITIONS)}), {}, lease)
        await clients[3].create_partition_states(name, {
            p: LeaderAndIsr(controller_epoch=lease.epoch, leader=replicas(p)[0],
                            leader_epoch=0, isr=replicas(p)) for p in range(PARTITIONS)},
            lease)
        await clients[3].resign(lease)
        await dead.aclose()  # broker 3's process is gone; its registration stays

        backend = clients[1]
        keys = [(name, p) for p in range(PARTITIONS)]
        reads: list[int] = []
        read = backend.partition_states_of

        async def counted(partitions: Any) -> Any:
            wanted = list(partitions)
            if any(k[0] == name for k in wanted):
                reads.append(len(wanted))
            return await read(wanted)

        backend.partition_states_of = counted  # type: ignore[method-assign]
        controller = Controller(1, backend, BrokerConfig({"log.dirs": str(tmp_path),
                                                          "broker.id": "1"}))
        tg.start_soon(controller.run)

        async def moved() -> bool:
            states = await read(keys)
            return len(states) == PARTITIONS and all(
                s.state.leader != 3 and 3 not in s.state.isr for s in states.values())

        await eventually(moved, "every partition without broker 3")
        await backend.settle()
        states = await read(keys)
        for (_, index), state in states.items():
            was = replicas(index)
            assert state.state.isr == [r for r in was if r != 3]
            # a new leader (epoch + 1) only where broker 3 led
            assert state.state.leader_epoch == (1 if was[0] == 3 else 0), (index, state)
        # one pass: the states were read once
        assert reads == [PARTITIONS], reads
        tg.cancel_scope.cancel()
    for client in clients.values():
        await client.close()
