"""Topic create / delete / grow / config changes (Kafka's AdminManager and
AdminZkClient): validate the request as Kafka does, write the metadata store,
then publish the new state so the metadata cache and the replica layer take it
on. Assignment comes from the controller's rule (controller/assignment.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pybroker.config import BrokerConfig, ConfigError, parse_topic_config
from pybroker.coordination.base import MetadataStore, TopicRecord, validate_topic_name
from pybroker.controller.assignment import assign_replicas
from pybroker.errors import ErrorCode, KafkaError
from pybroker.metadata.cache import MetadataCache

log = logging.getLogger(__name__)

#: no request may create more partitions than this for one topic (a guard, not Kafka's)
PARTITIONS_PER_TOPIC_MAX = 10000


class TopicAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        metadata: MetadataCache,
        publish: Callable[[TopicRecord], None],
        unpublish: Callable[[str], None],
        publish_configs: Callable[[TopicRecord], None],
    ) -> None:
        self.config = config
        self.store = store
        self.metadata = metadata
        self._publish = publish
        self._unpublish = unpublish
        self._publish_configs = publish_configs

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicRecord | None:
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
                                          list(self.metadata.brokers))
        checked = self._validate_topic_configs(configs or {})
        if validate_only:
            return None
        record = self.store.create_topic(name, num_partitions, replication_factor, checked)
        self._publish(record)
        log.info("created topic %s with %d partitions", name, num_partitions)
        return record

    def auto_create_topic(self, name: str) -> TopicRecord | None:
        """Create a topic a client asked for, when auto.create.topics.enable allows."""
        if not self.config["auto.create.topics.enable"]:
            return None
        return self.create_topic(name)

    def delete_topic(self, name: str) -> None:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        if self.metadata.topic(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        self._unpublish(name)
        self.store.delete_topic(name)
        log.info("deleted topic %s", name)

    def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None,
        validate_only: bool = False,
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
        if validate_only:
            return
        self._publish(self.store.add_partitions(name, count))

    def alter_topic_configs(self, name: str, configs: dict[str, str | None],
                            validate_only: bool = False) -> None:
        """Replace the topic's overrides (AlterConfigs semantics): validated,
        persisted in the metadata store, applied to the open logs."""
        if self.metadata.topic(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {name} does not exist")
        checked = self._validate_topic_configs(configs)
        if validate_only:
            return
        record = self.store.set_topic_configs(name, checked)
        self._publish_configs(record)
        log.info("topic %s configs set to %s", name, checked)

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
        checked: dict[str, str] = {}
        for key, value in configs.items():
            if value is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Null value not supported for topic configs: {key}")
            try:
                parse_topic_config(key, value)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc
            checked[key] = value
        return checked
