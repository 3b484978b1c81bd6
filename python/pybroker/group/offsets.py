"""Where group state is stored: the compacted internal topic `__consumer_offsets`.

A group lives in partition `Utils.abs(javaStringHashCode(group)) % N` (Kafka's
rule, so tools that read the topic find it where Kafka would put it). The topic
is created on first use. Each write is one uncompressed batch appended before
the request that caused it is answered; on start the coordinator replays
every partition (records.py describes the key/value formats)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple, Protocol

from pybroker.admin.internal_topics import OFFSETS_TOPIC
from pybroker.group.records import build_batch, iter_records, txn_batch_info
from pybroker.group.txn_offsets import TxnData, TxnMarker, TxnProducer

if TYPE_CHECKING:
    from pybroker.admin.topics import TopicAdmin
    from pybroker.config import BrokerConfig
    from pybroker.metadata.cache import MetadataCache
    from pybroker.replica.manager import ReplicaManager
    from pybroker.replica.partition import ReplicaPartition

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 1 << 20


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, with Integer.MIN_VALUE mapped to 0 (not `n & 0x7fffffff`,
    which places groups with a negative hash elsewhere)."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    return java_abs(java_string_hash(group_id)) % partitions


Record = tuple[bytes, bytes | None]


class Appended(NamedTuple):
    """Records appended to an offsets partition: the ISR has them once the
    partition's high watermark reaches `end_offset`."""

    partition: ReplicaPartition
    end_offset: int


class GroupStore(Protocol):
    """What the coordinator needs from storage (a fake one in unit tests)."""

    async def ensure(self) -> None: ...

    def partition_of(self, group_id: str) -> int: ...

    def append(self, group_id: str, records: list[Record],
               required_acks: int = 1, producer: TxnProducer | None = None
               ) -> Appended | None: ...

    def load(self, partition: int | None = None, transactions: bool = False
             ) -> Iterator[Record | TxnData | TxnMarker]: ...


class MemoryStore:
    """GroupStore in a list: unit tests, and the record of what was written."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    async def ensure(self) -> None:
        pass

    def partition_of(self, group_id: str) -> int:
        return 0

    def append(self, group_id: str, records: list[Record],
               required_acks: int = 1, producer: TxnProducer | None = None
               ) -> Appended | None:
        self.records.extend(records)
        return None  # nothing to replicate

    def load(self, partition: int | None = None, transactions: bool = False
             ) -> Iterator[Record | TxnData | TxnMarker]:
        return iter(list(self.records))


class OffsetsTopic:
    """GroupStore over the broker's `__consumer_offsets` partitions."""

    def __init__(self, config: BrokerConfig, metadata: MetadataCache, replicas: ReplicaManager,
                 admin: TopicAdmin) -> None:
        self.config = config
        self.metadata = metadata
        self.replicas = replicas
        self.admin = admin

    @property
    def partition_count(self) -> int:
        record = self.metadata.topic(OFFSETS_TOPIC)
        if record is not None:
            return len(record.partitions)
        return int(self.config["offsets.topic.num.partitions"])

    async def ensure(self) -> None:
        """Create the topic on first use, with its own settings
        (admin/internal_topics.py)."""
        if self.metadata.topic(OFFSETS_TOPIC) is None:
            await self.admin.create_internal_topic(OFFSETS_TOPIC)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count)

    def append(self, group_id: str, records: list[Record],
               required_acks: int = 1, producer: TxnProducer | None = None) -> Appended | None:
        """Append to the group's offsets partition, which this broker must lead
        (as `producer`'s transactional batch for TxnOffsetCommit).
        With required_acks=-1 the ISR must be at least min.insync.replicas
        (KafkaError NOT_ENOUGH_REPLICAS otherwise); the caller waits for the
        returned offset to be committed."""
        if not records:
            return None
        index = self.partition_of(group_id)
        partition = self.replicas.get(OFFSETS_TOPIC, index)
        if partition is None:
            raise RuntimeError(f"{OFFSETS_TOPIC}-{index} is not open")
        batch = build_batch(records, int(time.time() * 1000)) if producer is None else \
            build_batch(records, int(time.time() * 1000), producer_id=producer.producer_id,
                        producer_epoch=producer.producer_epoch,
                        base_sequence=producer.base_sequence, transactional=True)
        result = partition.append_as_leader(memoryview(batch), required_acks=required_acks)
        return Appended(partition, int(result.last_offset) + 1)

    def load(self, partition: int | None = None, transactions: bool = False
             ) -> Iterator[Record | TxnData | TxnMarker]:
        """Replay the records of one partition (or all): everything in the local log,
        which a new leader's followers will all have once they catch up. Records of
        transactional batches (TxnOffsetCommit) come as TxnData and their COMMIT/ABORT
        as TxnMarker when `transactions`, else they are left out."""
        record = self.metadata.topic(OFFSETS_TOPIC)
        if record is None:
            return
        indexes = range(len(record.partitions)) if partition is None else [partition]
        for index in indexes:
            replica = self.replicas.get(OFFSETS_TOPIC, index)
            if replica is None:
                continue
            offset = replica.log_start_offset
            end = replica.log_end_offset
            while offset < end:
                chunk = replica.read(offset, READ_CHUNK_BYTES, True, committed_only=False)
                if chunk is None:
                    break
                last = offset - 1
                data = chunk.read()
                batches = list(txn_batch_info(data))
                at = 0
                for record_offset, key, value in iter_records(data):
                    last = record_offset
                    while at + 1 < len(batches) and batches[at + 1][0] <= record_offset:
                        at += 1
                    if record_offset < offset:
                        continue
                    info = batches[at][1] if batches else None
                    if info is not None and not transactions:
                        continue
                    if info is not None and info.commit is not None:
                        yield TxnMarker(info.producer_id, info.commit)
                    elif key is not None and info is not None:
                        yield TxnData(key, value, info.producer_id, info.producer_epoch,
                                      info.base_sequence + info.last_offset_delta, index)
                    elif key is not None:
                        yield key, value
                if last < offset:
                    log.warning("%s-%d: no readable record at %d; stopping replay",
                                OFFSETS_TOPIC, index, offset)
                    break
                offset = last + 1
