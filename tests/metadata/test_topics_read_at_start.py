"""A broker's first read of the topics (every topic, at a restart) reaches the replica
layer as one batch, so the next topic's logs open on the worker threads while one topic
is applied on the loop; the topics' configs are read side by side, not one round trip
after another (issue 25: a restart at 10,000 partitions)."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from pybroker.coordination.base import TopicAssignment, TopicRecord, VersionedState
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.metadata.listener import MetadataListener

TOPICS = 30


class _Backend:
    """topic_configs takes a round trip; how many were out at once is kept."""

    def __init__(self, fail: str | None = None) -> None:
        self.out = 0
        self.most_out = 0
        self.fail = fail

    async def topic_configs(self, name: str) -> dict[str, str]:
        self.out += 1
        self.most_out = max(self.most_out, self.out)
        try:
            await anyio.sleep(0.01)
            if name == self.fail:
                raise RuntimeError(f"reading {name}'s configs failed")
            return {"retention.ms": name[1:]}
        finally:
            self.out -= 1


class _Publisher:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.single: list[str] = []

    async def topics_changed(self, changes: list[tuple[TopicRecord, list[int]]],
                             only: Any = None) -> None:
        assert only is None
        self.batches.append([record.name for record, _ in changes])
        for record, _ in changes:
            assert record.configs == {"retention.ms": record.name[1:]}

    async def topic_changed(self, record: TopicRecord, versions: Any = None) -> None:
        self.single.append(record.name)

    def topic_deleted(self, name: str) -> None:
        pass


def _topics(count: int) -> dict[str, TopicAssignment]:
    return {f"t{i}": TopicAssignment(name=f"t{i}", topic_id=uuid.uuid4(),
                                     partitions={0: [1, 2, 3], 1: [2, 3, 1]})
            for i in range(count)}


def test_every_topic_of_the_first_read_goes_in_one_batch() -> None:
    backend, publisher = _Backend(), _Publisher()
    listener = MetadataListener(backend, publisher, "PLAINTEXT")  # type: ignore[arg-type]
    topics = _topics(TOPICS)
    anyio.run(listener._topics_changed, topics)
    assert publisher.batches == [list(topics)]
    assert publisher.single == []
    assert backend.most_out > 1  # the configs were read side by side
    assert set(listener.assignments) == set(topics)

    # later, one topic created: applied alone, as it always was; the others untouched
    topics["new"] = TopicAssignment(name="new", topic_id=uuid.uuid4(), partitions={0: [1]})
    listener.configs["new"] = {"retention.ms": "ew"}
    anyio.run(listener._topics_changed, topics)
    assert publisher.single == ["new"]
    assert len(publisher.batches) == 1


def test_a_failed_config_read_applies_nothing_and_raises() -> None:
    """The watch reads again after a failure: no topic is half taken on meanwhile."""
    backend, publisher = _Backend(fail="t3"), _Publisher()
    listener = MetadataListener(backend, publisher, "PLAINTEXT")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="t3"):
        anyio.run(listener._topics_changed, _topics(TOPICS))
    assert publisher.batches == [] and publisher.single == []
    assert listener.assignments == {}


class _WatchingBackend(_Backend):
    """The store as a broker's listener meets it at a start: each watch hands over what
    is there when it is set up (states for every partition, led by broker 2)."""

    def __init__(self, topics: dict[str, TopicAssignment]) -> None:
        super().__init__()
        self.topics = topics

    async def watch_brokers(self, callback: Any) -> Any:
        return _Handle()

    async def watch_controller(self, callback: Any) -> Any:
        return _Handle()

    async def watch_topic_configs(self, callback: Any) -> Any:
        return _Handle()

    def on_session_reestablished(self, callback: Any) -> Any:
        return _Handle()

    async def watch_topics(self, callback: Any) -> Any:
        await callback(dict(self.topics))
        return _Handle()

    async def watch_partition_states(self, callback: Any, *, whole_batches: bool) -> Any:
        state = VersionedState(LeaderAndIsr(controller_epoch=1, leader=2, leader_epoch=4,
                                            isr=[2, 3]), 7)
        await callback({name: dict.fromkeys(a.partitions, state)
                        for name, a in self.topics.items()})
        return _Handle()


class _Handle:
    def cancel(self) -> None:
        pass


class _RecordingPublisher(_Publisher):
    def __init__(self) -> None:
        super().__init__()
        self.leaders: list[list[int]] = []

    async def topics_changed(self, changes: list[tuple[TopicRecord, list[int]]],
                             only: Any = None) -> None:
        await super().topics_changed(changes, only)
        self.leaders.append([p.leader for record, _ in changes for p in record.partitions])


def test_a_start_hands_each_topic_over_once_with_its_states() -> None:
    """The states are read before the topics: a restart's topics reach the replica layer
    once, with their leaders, not first without any (every log opened as a follower of
    no one) and then again with them."""
    topics = _topics(TOPICS)
    publisher = _RecordingPublisher()
    listener = MetadataListener(_WatchingBackend(topics), publisher,  # type: ignore[arg-type]
                                "PLAINTEXT")
    anyio.run(listener.start)
    assert publisher.batches == [list(topics)]
    assert publisher.leaders == [[2] * (2 * TOPICS)]
    assert publisher.single == []
