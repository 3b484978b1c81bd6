"""Where transaction state is stored: the compacted internal topic
`__transaction_state` (records.py has the formats).

A transactional id lives in partition `Utils.abs(javaStringHashCode(id)) % N`
(Kafka's rule), and the leader of that partition is its coordinator. Each
state change is one uncompressed batch appended with acks=all and answered
once the ISR has it; a new leader replays the whole partition."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pybroker.admin.internal_topics import TRANSACTION_STATE_TOPIC
from pybroker.errors import BUG_REPORT, ErrorCode, KafkaError
from pybroker.group.offsets import java_abs, java_string_hash
from pybroker.group.records import build_batch, iter_records

if TYPE_CHECKING:
    from pybroker.admin.topics import TopicAdmin
    from pybroker.config import BrokerConfig
    from pybroker.metadata.cache import MetadataCache
    from pybroker.purgatory import Purgatory
    from pybroker.replica.manager import ReplicaManager

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 1 << 20
#: how long a state write waits for the ISR (Kafka: request.timeout.ms's default)
WRITE_TIMEOUT_S = 30.0


def partition_for(transactional_id: str, partitions: int) -> int:
    return java_abs(java_string_hash(transactional_id)) % partitions


class TransactionLog:
    def __init__(self, config: BrokerConfig, metadata: MetadataCache, replicas: ReplicaManager,
                 admin: TopicAdmin, purgatory: Purgatory) -> None:
        self.config = config
        self.metadata = metadata
        self.replicas = replicas
        self.admin = admin
        self.purgatory = purgatory

    @property
    def partition_count(self) -> int:
        record = self.metadata.topic(TRANSACTION_STATE_TOPIC)
        if record is not None:
            return len(record.partitions)
        return int(self.config["transaction.state.log.num.partitions"])

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count)

    async def ensure(self) -> None:
        """Create the topic on first use (FindCoordinator for a transaction), with its
        own settings (admin/internal_topics.py)."""
        if self.metadata.topic(TRANSACTION_STATE_TOPIC) is None:
            await self.admin.create_internal_topic(TRANSACTION_STATE_TOPIC)

    async def write(self, index: int, key: bytes, value: bytes | None) -> ErrorCode:
        """Append one record to partition `index` (led here) with acks=all and wait
        until the ISR has it. Returns the error a client of the coordinator gets
        (Kafka's TransactionStateManager.appendTransactionToLog mapping)."""
        partition = self.replicas.get(TRANSACTION_STATE_TOPIC, index)
        if partition is None:
            return ErrorCode.NOT_COORDINATOR
        try:
            result = partition.append_as_leader(
                memoryview(build_batch([(key, value)], int(time.time() * 1000))),
                required_acks=-1)
        except KafkaError as exc:
            return _write_error(exc.code)
        except Exception:
            log.exception("writing to %s-%d failed: the producer gets UNKNOWN_SERVER_ERROR "
                          "and may retry. " + BUG_REPORT, TRANSACTION_STATE_TOPIC, index)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        end = int(result.last_offset) + 1
        await self.purgatory.wait_until(
            "produce", [partition.hw_key], lambda: partition.acks_all_status(end) is not None,
            time.monotonic() + WRITE_TIMEOUT_S)
        status = partition.acks_all_status(end)
        return _write_error(ErrorCode.REQUEST_TIMED_OUT if status is None else status)

    def load(self, index: int) -> Iterator[tuple[bytes, bytes | None]]:
        """Every (key, value) in the local log of partition `index`, in order."""
        replica = self.replicas.get(TRANSACTION_STATE_TOPIC, index)
        if replica is None:
            return
        offset, end = replica.log_start_offset, replica.log_end_offset
        while offset < end:
            chunk = replica.read(offset, READ_CHUNK_BYTES, True, committed_only=False)
            if chunk is None:
                break
            last = offset - 1
            for record_offset, key, value in iter_records(chunk.read()):
                last = record_offset
                if key is not None and record_offset >= offset:
                    yield key, value
            if last < offset:
                log.warning("%s-%d: no readable record at %d; stopping replay",
                            TRANSACTION_STATE_TOPIC, index, offset)
                break
            offset = last + 1


def _write_error(code: ErrorCode) -> ErrorCode:
    if code == ErrorCode.NONE:
        return code
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR,
                ErrorCode.FENCED_LEADER_EPOCH):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR
