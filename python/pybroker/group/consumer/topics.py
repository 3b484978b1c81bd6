"""The topics a consumer group coordinator sees: names, ids and partition counts
(from the broker's metadata cache; a dict in unit tests)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pybroker.metadata.cache import MetadataCache


class TopicView(Protocol):
    def topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        """name -> (topic id, partition count) of every topic."""
        ...

    def names(self) -> list[str]:
        """Every topic name (a snapshot)."""
        ...

    def created(self) -> int:
        """A count that moves whenever a topic is created."""
        ...


class MetadataTopics:
    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata

    def topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {name: (record.topic_id, len(record.partitions))
                for name, record in list(self.metadata.topics.items())}

    def names(self) -> list[str]:
        return list(self.metadata.topics)

    def created(self) -> int:
        return self.metadata.topics_created


class StaticTopics:
    """A fixed set of topics (unit tests)."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.table = {name: (uuid.uuid5(uuid.NAMESPACE_URL, name), count)
                      for name, count in counts.items()}
        self.created_count = 0

    def add(self, name: str, count: int) -> None:
        self.table[name] = (uuid.uuid5(uuid.NAMESPACE_URL, name), count)
        self.created_count += 1

    def topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        return dict(self.table)

    def names(self) -> list[str]:
        return list(self.table)

    def created(self) -> int:
        return self.created_count
