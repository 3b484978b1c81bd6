"""Applies a metadata change to this broker: the cache handlers read, then the
replica layer (open logs, become leader or follower). One path for every
source of change — the single node's own admin operations today, the
cluster's coordination store (watches) in cluster mode — so a single node is a
cluster of one, not a second code path."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping

from pybroker.coordination.base import TopicRecord
from pybroker.metadata.cache import BrokerEndpoint, MetadataCache
from pybroker.purgatory import Purgatory
from pybroker.replica.manager import ReplicaManager
from pybroker.server.loop_slice import LoopSlice


log = logging.getLogger(__name__)


def topic_key(name: str) -> tuple[str, str]:
    """The purgatory key notified when this broker's metadata of a topic changes
    (admin requests wait on it)."""
    return ("topic", name)


class MetadataPublisher:
    def __init__(self, metadata: MetadataCache, replicas: ReplicaManager,
                 purgatory: Purgatory) -> None:
        self.metadata = metadata
        self.replicas = replicas
        self.purgatory = purgatory

    def brokers_changed(self, brokers: list[BrokerEndpoint]) -> None:
        self.metadata.set_brokers(brokers)

    async def topic_changed(self, record: TopicRecord,
                            versions: list[int] | None = None) -> None:
        """A topic was created, grew, or its partition states changed (`versions`:
        each state's version in the store, for conditional ISR updates).

        While the replica layer takes it on (opening logs takes a while for a new
        topic), the cache already has the topic, but a partition this broker is to
        lead shows no leader until it leads it (clients get LEADER_NOT_AVAILABLE and
        retry, rather than a leader that refuses their requests); then the record as
        it is. Waiters on the topic re-check after each (a CreateTopics answer waits
        for the first)."""
        self.metadata.update_topic(self.replicas.as_served(record))
        self.purgatory.notify(topic_key(record.name))
        await self.replicas.apply_topic_async(record, versions)
        self.metadata.update_topic(record)
        self.purgatory.notify(topic_key(record.name))

    async def topics_changed(self, changes: list[tuple[TopicRecord, list[int]]],
                             only: Mapping[str, Collection[int]] | None = None) -> None:
        """topic_changed for several topics at once (their states changed together), in
        one pass of the replica layer: a controlled shutdown's leaderships over every
        topic take one round of leader-epoch checkpoint writes, not one per topic.
        `only`: of a topic named there, the partitions whose states changed (the
        replica layer applies those alone; the cache takes the whole record)."""
        started = time.monotonic()
        before = self.replicas.leadership_changes
        recording = self.replicas.epochs_recording_s
        if len(changes) == 1 and only is None:
            await self.topic_changed(*changes[0])
        else:
            await self._topics_changed(changes, only)
        took, gave = (now - was for now, was in zip(self.replicas.leadership_changes, before,
                                                     strict=True))
        if took or gave:
            # Kafka's state-change log of a LeaderAndIsr request: what moved, how long
            log.info("applied the partition states of %d topic(s): became leader of %d "
                     "partition(s), stopped leading %d, in %.3f s (their leader epochs "
                     "recorded in %.3f s)", len(changes), took, gave, time.monotonic() - started,
                     self.replicas.epochs_recording_s - recording)

    async def _topics_changed(self, changes: list[tuple[TopicRecord, list[int]]],
                              only: Mapping[str, Collection[int]] | None) -> None:
        pace = LoopSlice()  # thousands of partitions: the loop gets turns meanwhile
        for record, _ in changes:
            await pace.pause_if_due()
            self.metadata.update_topic(self.replicas.as_served(record))
            self.purgatory.notify(topic_key(record.name))

        def applied(record: TopicRecord) -> None:
            self.metadata.update_topic(record)
            self.purgatory.notify(topic_key(record.name))

        await self.replicas.apply_topics_async(changes, applied, only)

    def topic_deleted(self, name: str) -> None:
        self.metadata.remove_topic(name)
        self.replicas.remove_topic(name)
        self.purgatory.notify(topic_key(name))

    def topic_configs_changed(self, record: TopicRecord) -> None:
        self.metadata.update_topic(record)
        self.replicas.update_topic_config(record)
        self.purgatory.notify(topic_key(record.name))
