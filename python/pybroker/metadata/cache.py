"""The metadata cache: the brokers, the controller and every topic's partition
states (leader, leader epoch, replicas, ISR), as this broker last learned them
(Kafka's MetadataCache, filled by UpdateMetadata in the ZooKeeper era).

Handlers answer Metadata, FindCoordinator and routing questions from here and
never from the coordination store, so a request never waits on ZooKeeper."""

from __future__ import annotations

import dataclasses
import uuid

from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.protocol.types import ZERO_UUID


@dataclasses.dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    #: every registered (listener name, host, port): clients get the address of the
    #: listener they came in on, as in Kafka
    listeners: tuple[tuple[str, str, int], ...] = ()

    def address(self, listener: str | None) -> tuple[str, int]:
        """(host, port) on `listener`; the inter-broker one when it has none of that name."""
        for name, host, port in self.listeners:
            if name == listener:
                return host, port
        return self.host, self.port


class MetadataCache:
    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.controller_id = -1
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicRecord] = {}
        #: topic id -> name (KIP-516: Fetch v13+, Metadata v10+ and DeleteTopics v6 name
        #: topics by id; an id dies with its topic, a re-created topic gets a new one);
        #: read only through topic_name
        self._names_by_id: dict[uuid.UUID, str] = {}
        #: (topic, api version) -> (the record and the brokers it was made from, the
        #: topic's Metadata response entry, encoded): a full Metadata request re-encodes
        #: only the topics that changed (handlers/metadata.py)
        self.encoded_topics: dict[tuple[str, int], tuple[TopicRecord, object, object]] = {}
        #: counts topics created (a new name, or a name re-created with a new id): the
        #: consumer group coordinator resolves subscribed regexes again when it moved
        self.topics_created = 0

    # --- updates (from whoever learns of a change) --------------------------------
    def set_brokers(self, brokers: list[BrokerEndpoint]) -> None:
        self.brokers = {b.node_id: b for b in brokers}

    def set_controller(self, broker_id: int) -> None:
        self.controller_id = broker_id

    def update_topic(self, record: TopicRecord) -> None:
        old = self.topics.get(record.name)
        if old is not None and old.topic_id != record.topic_id:
            self._names_by_id.pop(old.topic_id, None)
        if old is None or old.topic_id != record.topic_id:
            self.topics_created += 1
        self.topics[record.name] = record
        self._names_by_id[record.topic_id] = record.name

    def remove_topic(self, name: str) -> None:
        old = self.topics.pop(name, None)
        if old is not None:
            self._names_by_id.pop(old.topic_id, None)
        for key in [k for k in self.encoded_topics if k[0] == name]:
            del self.encoded_topics[key]

    # --- reads ------------------------------------------------------------------
    def topic(self, name: str) -> TopicRecord | None:
        return self.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic a request names by id: the one way ids become topics,
        for the handlers and the authorizer alike. None for an id no topic has (and for
        the zero id, which names none: Kafka's UNKNOWN_TOPIC_ID). Ids are uuid.UUID past
        the codec; anything else is a bug, raised rather than looked up as unknown."""
        if not isinstance(topic_id, uuid.UUID):
            raise TypeError(f"topic id {topic_id!r} is not a uuid.UUID")
        if topic_id == ZERO_UUID:
            return None
        return self._names_by_id.get(topic_id)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRecord | None:
        name = self.topic_name(topic_id)
        return self.topics.get(name) if name is not None else None

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
