"""Topic create / delete / grow / config changes (Kafka's AdminManager and
AdminZkClient): validate the request as Kafka does and write the coordination
store; any broker may do this. The controller then gives new partitions their
leaders, and every broker learns of the change through its metadata watches.

CreateTopics, CreatePartitions and DeleteTopics are answered as Kafka 4.0's
controller answers them (ControllerApis: a write event completed at commit): once
the change is written (durable in the store; for a deletion, once the controller
has removed the topic) and known to this broker's metadata (so the client's next
admin request here finds it), not once brokers have opened the new logs and taken
on their leaders, or deleted the old logs; until new partitions are led, Metadata
shows them with LEADER_NOT_AVAILABLE and clients retry, as with Kafka. Waiting for
that here cost 1-2.6 s a 100-partition topic on a loaded machine (issue 25). The
internal callers (a topic auto-created by Metadata, the internal topics) still wait,
bounded, for the leaders, as do config changes. Assignment comes from the controller's
rule (controller/assignment.py)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from pybroker.admin.config_values import checked_configs
from pybroker.admin.internal_topics import INTERNAL_TOPICS, internal_topic_spec
from pybroker.config import BrokerConfig, parse_topic_config
from pybroker.coordination.base import (
    CoordinationBackend,
    PartitionState,
    TopicAssignment,
    TopicRecord,
    validate_topic_name,
)
from pybroker.controller.assignment import assign_replicas
from pybroker.errors import ErrorCode, KafkaError
from pybroker.metadata.cache import MetadataCache
from pybroker.metadata.publisher import topic_key
from pybroker.purgatory import Purgatory

log = logging.getLogger(__name__)

#: no request may create more partitions than this for one topic (a guard, not Kafka's)
PARTITIONS_PER_TOPIC_MAX = 10000
#: how long a topic auto-created by Metadata may take to get its leaders before the
#: answer goes out (clients retry LEADER_NOT_AVAILABLE anyway)
AUTO_CREATE_WAIT_MS = 2000


class TopicAdmin:
    def __init__(self, config: BrokerConfig, backend: CoordinationBackend,
                 metadata: MetadataCache, purgatory: Purgatory) -> None:
        self.config = config
        self.backend = backend
        self.metadata = metadata
        self.purgatory = purgatory

    async def _wait_for(self, name: str, ready: Callable[[], bool], timeout_ms: int) -> bool:
        return await self.purgatory.wait_until("admin", [topic_key(name)], ready,
                                               time.monotonic() + max(0, timeout_ms) / 1000)

    def _has_leaders(self, name: str) -> bool:
        record = self.metadata.topic(name)
        return record is not None and all(p.leader >= 0 for p in record.partitions)

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
        timeout_ms: int = 30000,
        wait_for_leaders: bool = True,
    ) -> TopicRecord | None:
        """Create the topic; with wait_for_leaders, wait (up to timeout_ms) until its
        partitions have leaders here, else only until this broker's metadata has the
        topic (the record returned then has the topic's id, shape and configs, and no
        leaders). Kafka's checks and
        codes. validate_only: nothing is created; the record returned (nil topic id,
        partitions led by their first replica) is the topic that would be, for the
        answer's shape and configs as Kafka gives them."""
        validate_topic_name(name)
        if self.metadata.topic(name) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        self._check_collision(name)
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            self._check_assignments(assignments)
            num_partitions = len(assignments)
            replication_factor = len(assignments[0])
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions must be larger than 0.")
        if num_partitions > PARTITIONS_PER_TOPIC_MAX:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions must be at most {PARTITIONS_PER_TOPIC_MAX}.")
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0.")
        if not assignments:
            assignments = assign_replicas(num_partitions, replication_factor,
                                          list(self.metadata.brokers), racks=self._racks())
        checked = self._validate_topic_configs(configs or {})
        if validate_only:
            return TopicRecord(name, uuid.UUID(int=0), [
                PartitionState(leader=a[0], leader_epoch=0, replicas=list(a), isr=list(a))
                for a in assignments], dict(checked))
        topic_id = uuid.uuid4()
        await self.backend.create_topic(
            TopicAssignment(name=name, topic_id=topic_id,
                            partitions=dict(enumerate(assignments))), checked, lease=None)
        log.info("created topic %s with %d partitions", name, num_partitions)
        if not wait_for_leaders:
            await self._wait_for(name, lambda: self.metadata.topic(name) is not None,
                                 timeout_ms)
            return TopicRecord(name, topic_id, [
                PartitionState(leader=-1, leader_epoch=-1, replicas=list(a), isr=[])
                for a in assignments], dict(checked))
        await self._wait_for(name, lambda: self._has_leaders(name), timeout_ms)
        return self.metadata.topic(name)

    async def auto_create_topic(self, name: str) -> TopicRecord | None:
        """Create a topic a client asked for, when auto.create.topics.enable allows
        (with num.partitions and default.replication.factor; an internal topic with its
        own settings, as Kafka's AutoTopicCreationManager)."""
        if not self.config["auto.create.topics.enable"]:
            return None
        if name in INTERNAL_TOPICS:
            return await self.create_internal_topic(name, timeout_ms=AUTO_CREATE_WAIT_MS)
        try:
            return await self.create_topic(name, timeout_ms=AUTO_CREATE_WAIT_MS)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:  # another client was first
                raise
            return self.metadata.topic(name)

    async def create_internal_topic(self, name: str, timeout_ms: int = 30000
                                    ) -> TopicRecord | None:
        """Create `__consumer_offsets` or `__transaction_state` with its own settings
        (admin/internal_topics.py), unless it exists; every path that creates one
        comes here. A concurrent creation (here or on another broker) is no error."""
        spec = internal_topic_spec(self.config, name, len(self.metadata.brokers))
        if spec is None:
            raise ValueError(f"{name} is not an internal topic")
        if self.metadata.topic(name) is not None:
            return self.metadata.topic(name)
        try:
            return await self.create_topic(name, spec.partitions, spec.replication_factor,
                                           dict(spec.configs), timeout_ms=timeout_ms)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            return self.metadata.topic(name)

    async def delete_topic(self, name: str, timeout_ms: int = 30000) -> None:
        """Mark the topic for deletion; the controller deletes it. Waits (up to
        timeout_ms) until it is gone from this broker's metadata (its logs are deleted
        after that, in the background)."""
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        if self.metadata.topic(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        await self.backend.request_topic_deletion(name)
        if not await self._wait_for(name, lambda: self.metadata.topic(name) is None,
                                    timeout_ms):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                             f"Topic {name} is marked for deletion but not deleted yet.")
        log.info("deleted topic %s", name)

    async def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None,
        validate_only: bool = False, timeout_ms: int = 30000,
    ) -> None:
        record = self.metadata.topic(name)
        if record is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"The topic '{name}' does not exist.")
        current = len(record.partitions)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than "
                             f"the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic already has {current} partitions.")
        if count > PARTITIONS_PER_TOPIC_MAX:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions must be at most {PARTITIONS_PER_TOPIC_MAX}.")
        if assignments is not None:
            if len(assignments) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {count - current} but "
                                 f"{len(assignments)} assignments provided.")
            self._check_assignments(assignments)
        else:
            assignments = assign_replicas(count - current, len(record.partitions[0].replicas),
                                          list(self.metadata.brokers), first_partition=current,
                                          racks=self._racks())
        if validate_only:
            return
        partitions = {i: list(p.replicas) for i, p in enumerate(record.partitions)}
        partitions.update({current + i: r for i, r in enumerate(assignments)})
        await self.backend.set_partition_assignment(
            TopicAssignment(name=name, topic_id=record.topic_id, partitions=partitions),
            lease=None)
        log.info("topic %s grown to %d partitions", name, count)
        # answered once written and known here (Kafka 4.0 answers at commit), not once
        # the new partitions are led: until they are, Metadata says LEADER_NOT_AVAILABLE
        await self._wait_for(name, lambda: (
            (r := self.metadata.topic(name)) is None or len(r.partitions) >= count),
            timeout_ms)

    async def alter_topic_configs(self, name: str, configs: dict[str, str | None],
                                  validate_only: bool = False, timeout_ms: int = 30000
                                  ) -> None:
        """Replace the topic's overrides (AlterConfigs semantics): validated,
        persisted in the metadata store, applied to the open logs."""
        if self.metadata.topic(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {name} does not exist")
        checked = self._validate_topic_configs(configs)
        if validate_only:
            return
        await self.backend.set_topic_configs(name, checked)
        await self._wait_for(name, lambda: (
            (r := self.metadata.topic(name)) is None or r.configs == checked), timeout_ms)
        log.info("topic %s configs set to %s", name, checked)

    def _racks(self) -> dict[int, str | None]:
        """broker.rack of each live broker (for rack-aware assignment)."""
        return {b.node_id: b.rack for b in self.metadata.brokers.values()}

    def _check_assignments(self, assignments: list[list[int]]) -> None:
        """Explicit replica lists: non-empty, same length, no duplicates, live brokers."""
        live = self.metadata.brokers
        for replicas in assignments:
            if (not replicas or len(set(replicas)) != len(replicas)
                    or len(replicas) != len(assignments[0])
                    or any(b not in live for b in replicas)):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Invalid replica assignment {replicas}")

    def _check_collision(self, name: str) -> None:
        """Kafka forbids topics differing only by '.' vs '_' (metric names collide)."""
        folded = name.replace(".", "_")
        for other in self.metadata.topics:
            if other.replace(".", "_") == folded:
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{name}' collides with existing topic: {other}",
                )

    def _validate_topic_configs(self, configs: dict[str, str | None]) -> dict[str, str]:
        return checked_configs(configs, parse_topic_config, "topic configs")
