"""Single-node metadata kept in one JSON file in the first log dir.

Writes go to a temporary file that is fsynced and renamed over the old one, so a
crash leaves either the old or the new metadata, never a torn file."""

from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path
from typing import Any

from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.errors import ErrorCode, KafkaError

METADATA_FILE = "pybroker-metadata.json"


def new_cluster_id() -> str:
    """Kafka's cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class EmbeddedStore:
    def __init__(self, data_dir: str | Path, broker_id: int) -> None:
        self.path = Path(data_dir) / METADATA_FILE
        self.broker_id = broker_id
        self._topics: dict[str, TopicRecord] = {}
        self._producer_id_next = 0
        if self.path.exists():
            state = json.loads(self.path.read_text())
            self.cluster_id = state["cluster_id"]
            self._producer_id_next = state.get("producer_id_next", 0)
            for raw in state["topics"]:
                record = _topic_from_json(raw)
                self._topics[record.name] = record
        else:
            self.cluster_id = new_cluster_id()
            self._save()

    def topics(self) -> dict[str, TopicRecord]:
        return self._topics

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicRecord:
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        record = TopicRecord(
            name=name,
            topic_id=uuid.uuid4(),
            partitions=[self._new_partition() for _ in range(partitions)],
            configs=dict(configs),
        )
        self._topics[name] = record
        self._save()
        return record

    def delete_topic(self, name: str) -> TopicRecord:
        record = self._require(name)
        del self._topics[name]
        self._save()
        return record

    def add_partitions(self, name: str, total: int) -> TopicRecord:
        record = self._require(name)
        record.partitions.extend(
            self._new_partition() for _ in range(total - len(record.partitions)))
        self._save()
        return record

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicRecord:
        record = self._require(name)
        record.configs = dict(configs)
        self._save()
        return record

    def allocate_producer_ids(self, count: int) -> range:
        """A block of producer ids no earlier or later call hands out, across restarts."""
        block = range(self._producer_id_next, self._producer_id_next + count)
        self._producer_id_next = block.stop
        self._save()
        return block

    def _new_partition(self) -> PartitionState:
        return PartitionState(self.broker_id, 0, [self.broker_id], [self.broker_id])

    def _require(self, name: str) -> TopicRecord:
        record = self._topics.get(name)
        if record is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' not found.")
        return record

    def _save(self) -> None:
        state = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "producer_id_next": self._producer_id_next,
            "topics": [_topic_to_json(t) for t in self._topics.values()],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _topic_to_json(record: TopicRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "topic_id": str(record.topic_id),
        "partitions": [
            {"leader": p.leader, "leader_epoch": p.leader_epoch, "replicas": p.replicas,
             "isr": p.isr}
            for p in record.partitions
        ],
        "configs": record.configs,
    }


def _topic_from_json(raw: dict[str, Any]) -> TopicRecord:
    return TopicRecord(
        name=raw["name"],
        topic_id=uuid.UUID(raw["topic_id"]),
        partitions=[PartitionState(**p) for p in raw["partitions"]],
        configs=dict(raw["configs"]),
    )
