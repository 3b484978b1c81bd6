"""Consumer-group helpers for the group integration tests (confluent-kafka)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

POLL_S = 0.05


class GroupMember:
    """A subscribed confluent consumer that records its assignment and messages."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], **conf: Any) -> None:
        base: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "socket.timeout.ms": 10000,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 2000,
        }
        base.update({k.replace("_", "."): v for k, v in conf.items()})
        self.incremental = base.get("partition.assignment.strategy") == "cooperative-sticky"
        self.consumer = Consumer(base)
        self.assignment: set[int] = set()
        self.assign_events = 0
        self.revoke_events = 0
        self.messages: list[tuple[int, int, bytes | None]] = []
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.assign_events += 1
        if self.incremental:
            self.assignment |= {p.partition for p in parts}
        else:
            self.assignment = {p.partition for p in parts}

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.revoke_events += 1
        if self.incremental:
            self.assignment -= {p.partition for p in parts}
        else:
            self.assignment = set()

    def poll(self) -> None:
        msg = self.consumer.poll(POLL_S)
        if msg is None:
            return
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                return
            raise KafkaException(msg.error())
        self.messages.append((msg.partition(), msg.offset(), msg.value()))

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


def poll_until(members: list[GroupMember], done: Callable[[], bool], timeout: float = 30.0,
               what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if done():
            return
    raise AssertionError(
        f"timed out waiting for {what}; assignments "
        f"{[sorted(m.assignment) for m in members]}, consumed {[len(m.messages) for m in members]}")


def split_evenly(members: list[GroupMember], partitions: int) -> bool:
    """Every partition assigned to exactly one member and each member has a share."""
    seen: list[int] = []
    for m in members:
        seen += m.assignment
    return sorted(seen) == list(range(partitions)) and all(m.assignment for m in members)
