"""The coordination interface every metadata backend implements."""

from __future__ import annotations

import dataclasses
import re
import uuid
from typing import Protocol

from pybroker.errors import ErrorCode, KafkaError

TOPIC_NAME_MAX = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str | None) -> None:
    """Kafka's Topic.validate: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > TOPIC_NAME_MAX:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {TOPIC_NAME_MAX} characters",
        )
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclasses.dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclasses.dataclass
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    #: per-topic config overrides as given (strings), validated on the way in
    configs: dict[str, str]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


class MetadataStore(Protocol):
    """What the broker needs from coordination. Methods raise KafkaError with
    Kafka's codes (TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION, ...)."""

    cluster_id: str

    def topics(self) -> dict[str, TopicRecord]: ...

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicRecord: ...

    def delete_topic(self, name: str) -> TopicRecord: ...

    def add_partitions(self, name: str, total: int) -> TopicRecord: ...

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicRecord: ...

    def allocate_producer_ids(self, count: int) -> range: ...
