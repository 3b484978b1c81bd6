"""The metadata cache: the brokers, the controller and every topic's partition
states (leader, leader epoch, replicas, ISR), as this broker last learned them
(Kafka's MetadataCache, filled by UpdateMetadata in the ZooKeeper era).

Handlers answer Metadata, FindCoordinator and routing questions from here and
never from the coordination store, so a request never waits on ZooKeeper."""

from __future__ import annotations

import dataclasses

from pybroker.coordination.base import PartitionState, TopicRecord


@dataclasses.dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class MetadataCache:
    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.controller_id = -1
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicRecord] = {}

    # --- updates (from whoever learns of a change) --------------------------------
    def set_brokers(self, brokers: list[BrokerEndpoint]) -> None:
        self.brokers = {b.node_id: b for b in brokers}

    def set_controller(self, broker_id: int) -> None:
        self.controller_id = broker_id

    def update_topic(self, record: TopicRecord) -> None:
        self.topics[record.name] = record

    def remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)

    # --- reads ------------------------------------------------------------------
    def topic(self, name: str) -> TopicRecord | None:
        return self.topics.get(name)

    def partition(self, topic: str, index: int) -> PartitionState | None:
        record = self.topics.get(topic)
        if record is None or not 0 <= index < len(record.partitions):
            return None
        return record.partitions[index]

    def broker(self, node_id: int) -> BrokerEndpoint | None:
        return self.brokers.get(node_id)

    def leader(self, topic: str, index: int) -> BrokerEndpoint | None:
        """The live leader of a partition, or None (no leader, or it is not alive)."""
        state = self.partition(topic, index)
        if state is None or state.leader < 0:
            return None
        return self.brokers.get(state.leader)
