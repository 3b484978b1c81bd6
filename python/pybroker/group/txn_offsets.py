"""Transactional offset commits (TxnOffsetCommit): offsets written to
`__consumer_offsets` in a transactional producer's batch stay pending, per
producer id, until the transaction's marker lands in that partition: COMMIT
makes them the group's committed offsets, ABORT drops them (Kafka's
GroupMetadata pendingTransactionalOffsetCommits). The same happens when the
log is replayed on load. OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT for a partition with a pending commit.

The batches carry the producer's id and epoch with sequences counted here per
(offsets partition, producer), as the partition's producer state expects."""

from __future__ import annotations

from typing import NamedTuple

from pybroker.group.state import OffsetEntry

TopicPartition = tuple[str, int]


class TxnProducer(NamedTuple):
    """Producer fields of a TxnOffsetCommit batch."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


class TxnData(NamedTuple):
    """A record of a transactional batch, replayed from the log."""

    key: bytes
    value: bytes | None
    producer_id: int
    producer_epoch: int
    last_sequence: int
    partition: int


class TxnMarker(NamedTuple):
    """A COMMIT (commit=True) or ABORT marker of a producer, replayed from the log."""

    producer_id: int
    commit: bool


class TxnOffsets:
    def __init__(self) -> None:
        #: producer id -> group -> offsets waiting for the producer's marker
        self.pending: dict[int, dict[str, dict[TopicPartition, OffsetEntry]]] = {}
        #: (offsets partition, producer id) -> (epoch, next sequence)
        self._sequences: dict[tuple[int, int], tuple[int, int]] = {}

    def producer(self, partition: int, producer_id: int, producer_epoch: int,
                 records: int) -> TxnProducer:
        """The producer fields of the next batch of `records` records."""
        epoch, seq = self._sequences.get((partition, producer_id), (producer_epoch, 0))
        if epoch != producer_epoch:
            seq = 0
        self._sequences[(partition, producer_id)] = (producer_epoch,
                                                     (seq + records) & 0x7FFFFFFF)
        return TxnProducer(producer_id, producer_epoch, seq)

    def unsend(self, partition: int, sent: TxnProducer) -> None:
        """The batch `sent` was not written: its sequences are used by the next one."""
        self._sequences[(partition, sent.producer_id)] = (sent.producer_epoch,
                                                          sent.base_sequence)

    def seen(self, partition: int, producer_id: int, producer_epoch: int,
             last_sequence: int) -> None:
        """A batch replayed from the log: the next one follows it."""
        self._sequences[(partition, producer_id)] = (producer_epoch,
                                                     (last_sequence + 1) & 0x7FFFFFFF)

    def add(self, producer_id: int, group_id: str,
            entries: list[tuple[TopicPartition, OffsetEntry]]) -> None:
        self.pending.setdefault(producer_id, {}).setdefault(group_id, {}).update(entries)

    def remove(self, producer_id: int, group_id: str, key: TopicPartition) -> None:
        """A replayed tombstone inside the transaction."""
        self.pending.get(producer_id, {}).get(group_id, {}).pop(key, None)

    def complete(self, producer_id: int, groups: set[str] | None
                 ) -> dict[str, dict[TopicPartition, OffsetEntry]]:
        """The producer's marker landed: its pending offsets of `groups` (None: all),
        taken out; the caller applies them on COMMIT."""
        mine = self.pending.get(producer_id)
        if not mine:
            return {}
        done = {g: mine.pop(g) for g in list(mine) if groups is None or g in groups}
        if not mine:
            del self.pending[producer_id]
        return done

    def drop_groups(self, groups: set[str]) -> None:
        for producer_id in list(self.pending):
            for group_id in groups & set(self.pending[producer_id]):
                del self.pending[producer_id][group_id]
            if not self.pending[producer_id]:
                del self.pending[producer_id]

    def forget_partition(self, partition: int) -> None:
        for key in [k for k in self._sequences if k[0] == partition]:
            del self._sequences[key]

    def is_pending(self, group_id: str, key: TopicPartition) -> bool:
        return any(key in groups.get(group_id, {}) for groups in self.pending.values())
