"""KIP-848 (group.protocol=consumer) members for the integration tests: a
confluent-kafka consumer that records its (incremental) assignment, what it
revoked, and what it consumed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

POLL_S = 0.05

#: broker settings that make the KIP-848 tests quick: members heartbeat every 300 ms and
#: a silent one is gone after 6 s (Kafka's minimums are larger; the min keys lower them)
FAST_GROUPS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.heartbeat.interval.ms": 300,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.session.timeout.ms": 1000,
}


class Member848:
    def __init__(self, bootstrap: str, group: str, topics: list[str], **conf: Any) -> None:
        base: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "socket.timeout.ms": 10000,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 2000,
        }
        base.update({k.replace("_", "."): v for k, v in conf.items()})
        self.consumer = Consumer(base)
        self.assignment: set[tuple[str, int]] = set()
        #: each on_assign's partitions, in order (KIP-848 assignments come in steps)
        self.assigned_steps: list[set[tuple[str, int]]] = []
        self.revoked: set[tuple[str, int]] = set()
        self.messages: list[tuple[str, int, int, bytes | None]] = []
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        step = {(p.topic, p.partition) for p in parts}
        self.assignment |= step
        if step:
            self.assigned_steps.append(step)

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        gone = {(p.topic, p.partition) for p in parts}
        self.revoked |= gone
        self.assignment -= gone

    @property
    def partitions(self) -> set[int]:
        return {p for _, p in self.assignment}

    def poll(self) -> None:
        msg = self.consumer.poll(POLL_S)
        if msg is None:
            return
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                return
            raise KafkaException(msg.error())
        self.messages.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))

    def resubscribe(self, topics: list[str]) -> None:
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)

    def close(self) -> None:
        self.consumer.close()


def poll_until(members: list[Member848], done: Callable[[], bool], timeout: float = 40.0,
               what: str = "condition", between: Callable[[], None] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if between is not None:
            between()
        if done():
            return
    raise AssertionError(
        f"timed out waiting for {what}; assignments {[sorted(m.assignment) for m in members]}, "
        f"consumed {[len(m.messages) for m in members]}")
