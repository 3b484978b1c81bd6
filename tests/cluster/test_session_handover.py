"""After a lost ZooKeeper session, a broker is handed every topic again.

When its session is lost the broker fences itself: it leads and follows nothing
(ReplicaManager.fence). The watches re-read everything on the new session but
report only what changed meanwhile, and a partition whose state did not change
— one where this broker is a replica out of the ISR, which the controller has no
reason to touch when the broker's session goes — would stay fenced: never
followed, never caught up, never back in the ISR. The metadata listener hands
every topic over again once the new session is up.

In process, on the real ZooKeeper backend and the real metadata listener; the
publisher only records what it is handed."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from kazoo.client import KazooClient

from pybroker.coordination.base import TopicAssignment, TopicRecord
from pybroker.coordination.zookeeper import ZooKeeperBackend
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.metadata.cache import BrokerEndpoint, MetadataCache
from pybroker.metadata.listener import MetadataListener
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.anyio

WAIT_S = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class RecordingPublisher:
    """Stands where MetadataPublisher stands; notes each topic it is handed."""

    def __init__(self) -> None:
        self.metadata = MetadataCache("test")
        self.handed: list[TopicRecord] = []

    def brokers_changed(self, brokers: list[BrokerEndpoint]) -> None:
        self.metadata.set_brokers(brokers)

    def topic_changed(self, record: TopicRecord, versions: list[int] | None = None) -> None:
        self.handed.append(record)

    async def topics_changed(self, changes: list[tuple[TopicRecord, list[int]]],
                             only: Any = None) -> None:
        for record, versions in changes:
            self.topic_changed(record, versions)

    def topic_deleted(self, name: str) -> None:
        pass

    def topic_configs_changed(self, record: TopicRecord) -> None:
        pass


@pytest.fixture
async def backend(zookeeper: ZooKeeperServer) -> AsyncIterator[ZooKeeperBackend]:
    store = ZooKeeperBackend(zookeeper.connect_string(f"/handover-{uuid.uuid4().hex[:8]}"),
                             session_timeout_ms=3000, request_timeout_ms=10000)
    await store.start()
    try:
        yield store
    finally:
        await store.close()


async def eventually(check: object, what: str) -> None:
    with anyio.move_on_after(WAIT_S):
        while not check():  # type: ignore[operator]
            await anyio.sleep(0.02)
        return
    pytest.fail(f"timed out after {WAIT_S}s waiting for {what}")


async def test_every_topic_is_handed_over_again_after_a_new_session(
        backend: ZooKeeperBackend, zookeeper: ZooKeeperServer) -> None:
    lease = await backend.try_elect_controller(2)
    assert lease is not None
    # broker 1 holds a replica of lagging-0 but is out of its ISR
    await backend.create_topic(TopicAssignment(name="lagging", topic_id=uuid.uuid4(),
                                               partitions={0: [2, 1]}), {}, lease)
    await backend.create_partition_states("lagging", {0: LeaderAndIsr(
        controller_epoch=lease.epoch, leader=2, leader_epoch=0, isr=[2])}, lease)
    publisher = RecordingPublisher()
    listener = MetadataListener(backend, publisher, "PLAINTEXT")  # type: ignore[arg-type]
    events: list[str] = []
    backend.on_session_lost(lambda: events.append("lost"))
    await listener.start()
    try:
        await eventually(lambda: any(r.name == "lagging" for r in publisher.handed),
                         "the topic to be handed over")
        before = len(publisher.handed)

        # expire the session: a second client joins it with its id and password and
        # closes it (the known trick)
        session_id, password = backend.zk.kazoo.client_id
        thief = KazooClient(hosts=backend.connect, client_id=(session_id, password))
        await anyio.to_thread.run_sync(thief.start, 10)
        await anyio.to_thread.run_sync(thief.stop)
        thief.close()
        await eventually(lambda: events == ["lost"], "the session to be lost")

        # nothing changed in the store, yet the topic is handed over again
        await eventually(lambda: any(r.name == "lagging" for r in publisher.handed[before:]),
                         "the topic to be handed over again on the new session")
        again = next(r for r in publisher.handed[before:] if r.name == "lagging")
        assert again.partitions[0].leader == 2 and again.partitions[0].isr == [2]
    finally:
        listener.stop()
