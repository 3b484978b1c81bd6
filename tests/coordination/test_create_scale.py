"""Creating a topic costs the same whatever is there already (issue 25): the controller
writes a new topic's partition states in one store write, and a broker applies the
topic once for them all, never touching the other topics. Counted, not timed: with
the real controller, the real metadata listener and each backend (embedded and a real
ZooKeeper)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.controller.controller import Controller
from pybroker.coordination.base import CoordinationBackend, TopicAssignment, TopicRecord
from pybroker.coordination.znodes import BrokerRegistration
from pybroker.metadata.listener import MetadataListener
from tests.coordination.conftest import Cluster, eventually

pytestmark = pytest.mark.anyio

PARTITIONS = 50


class _Cache:
    def set_controller(self, controller: int) -> None:
        pass


class RecordingPublisher:
    """Stands in for the broker's publisher (cache + replica layer): records what the
    listener hands over."""

    def __init__(self) -> None:
        self.metadata = _Cache()
        self.applied: list[str] = []
        self.latest: dict[str, TopicRecord] = {}

    def brokers_changed(self, brokers: list[Any]) -> None:
        pass

    async def topic_changed(self, record: TopicRecord, versions: list[int] | None = None
                            ) -> None:
        self.applied.append(record.name)
        self.latest[record.name] = record

    async def topics_changed(self, changes: list[tuple[TopicRecord, list[int]]],
                             only: Any = None) -> None:
        for record, versions in changes:
            await self.topic_changed(record, versions)

    def topic_deleted(self, name: str) -> None:
        self.applied.append(name)

    def topic_configs_changed(self, record: TopicRecord) -> None:
        self.applied.append(record.name)

    def led(self, name: str) -> bool:
        record = self.latest.get(name)
        return record is not None and len(record.partitions) == PARTITIONS and all(
            p.leader == 1 for p in record.partitions)


def count_state_writes(backend: CoordinationBackend) -> list[str]:
    """Wrap the backend's partition-state writes to log each call."""
    calls: list[str] = []
    for method in ("create_partition_states", "update_partition_state"):
        original = getattr(backend, method)

        def counted(*args: Any, _original: Any = original, _name: str = method,
                    **kwargs: Any) -> Any:
            calls.append(_name)
            return _original(*args, **kwargs)

        setattr(backend, method, counted)
    return calls


async def test_a_new_topic_is_written_and_applied_once(cluster: Cluster,
                                                       tmp_path: Path) -> None:
    backend = await cluster.client()
    await backend.register_broker(1, BrokerRegistration.create([("PLAINTEXT", "127.0.0.1",
                                                                  9)]))
    controller = Controller(1, backend, BrokerConfig({"log.dirs": str(tmp_path),
                                                      "broker.id": "1"}))
    publisher = RecordingPublisher()
    listener = MetadataListener(backend, publisher, "PLAINTEXT")  # type: ignore[arg-type]
    writes = count_state_writes(backend)

    async def create(name: str) -> None:
        await backend.create_topic(TopicAssignment(
            name=name, topic_id=uuid.uuid4(),
            partitions={p: [1] for p in range(PARTITIONS)}), {}, lease=None)
        await eventually(lambda: publisher.led(name), f"every partition of {name} led")
        await backend.settle()

    async with anyio.create_task_group() as tg:
        tg.start_soon(controller.run)
        await listener.start()
        await eventually(lambda: controller.is_active, "the controller elected")
        for i in range(3):
            await create(f"existing-{i}")
        publisher.applied.clear()
        writes.clear()

        await create("new")

        # the other topics were not applied again, the new one at most twice (its
        # assignment, then its partitions' states in one batch)
        assert set(publisher.applied) == {"new"}
        assert len(publisher.applied) <= 2, publisher.applied
        # one write for all of its partitions' states, none for the other topics'
        assert writes == ["create_partition_states"]
        listener.stop()
        tg.cancel_scope.cancel()
