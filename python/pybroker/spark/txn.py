"""One Spark task's Kafka transaction, for the sink's exactly-once mode.

A task owns the transactional id ``<prefix>-<task partition id>``. ``begin`` sends
InitProducerId: the coordinator bumps the id's epoch, which fences any earlier
attempt of the same task (a zombie's next Produce or EndTxn fails) and aborts the
transaction it left open. Batches built by ``pybroker._core`` carry no producer, so
``produce`` stamps each one (producer id, epoch, per-partition sequence, the
transactional attribute; CRC recomputed) and registers new partitions with
AddPartitionsToTxn before their first Produce. The task never ends its
transaction: it hands ``TxnHandle`` to the driver, which commits every task's
transaction once all tasks succeeded (``commit_all``) or aborts them.

Marker records (``pybroker.spark.sink``) are read with ``read_marker_records``,
which resolves transactions itself instead of using read_committed: a
transactional record counts once its producer's COMMIT marker follows it. A
read_committed Fetch would stop at the last stable offset, so a transaction left
open by a crashed driver could hide a marker committed after it. EndTxn answers
before the coordinator has written the COMMIT markers; a task reads the markers
after its own InitProducerId, which the coordinator holds off
(CONCURRENT_TRANSACTIONS, retried) until the id's previous transaction is complete,
so the task's own marker of an earlier attempt is resolved by then.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from pybroker._core import crc32c, decode_batch
from pybroker.spark.client import KafkaClient, KafkaError, TopicPartition

# v2 record batch header (Kafka's DefaultRecordBatch): byte positions
_LENGTH_AT, _ATTRIBUTES_AT, _CRC_AT = 8, 21, 17
_LAST_DELTA_AT, _PRODUCER_AT, _COUNT_AT = 23, 43, 57
_HEADER_BYTES = 61
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
CONTROL_COMMIT = 1  # control record key: version int16, type int16 (0 abort, 1 commit)


@dataclass(frozen=True)
class TxnHandle:
    """What the driver needs to end a task's transaction (sent in the commit message)."""

    transactional_id: str
    producer_id: int
    epoch: int


def stamp(batch: bytes, producer_id: int, epoch: int, base_sequence: int) -> tuple[bytes, int]:
    """The batch as a transactional producer's, and its record count."""
    buf = bytearray(batch)
    (attrs,) = struct.unpack_from(">h", buf, _ATTRIBUTES_AT)
    struct.pack_into(">h", buf, _ATTRIBUTES_AT, attrs | ATTR_TRANSACTIONAL)
    struct.pack_into(">qhi", buf, _PRODUCER_AT, producer_id, epoch, base_sequence)
    (count,) = struct.unpack_from(">i", buf, _COUNT_AT)
    # the CRC covers everything from the attributes on
    struct.pack_into(">I", buf, _CRC_AT, crc32c(memoryview(buf)[_ATTRIBUTES_AT:]))
    return bytes(buf), count


@dataclass
class TaskTransaction:
    client: KafkaClient
    handle: TxnHandle
    partitions: set[TopicPartition] = field(default_factory=set)
    sequences: dict[TopicPartition, int] = field(default_factory=dict)

    @staticmethod
    def begin(client: KafkaClient, transactional_id: str, timeout_ms: int) -> TaskTransaction:
        producer_id, epoch = client.init_producer_id(transactional_id, timeout_ms)
        return TaskTransaction(client, TxnHandle(transactional_id, producer_id, epoch))

    def produce(self, batches: dict[TopicPartition, list[bytes]]) -> None:
        new = [tp for tp in batches if tp not in self.partitions]
        if new:
            h = self.handle
            self.client.add_partitions_to_txn(h.transactional_id, h.producer_id, h.epoch, new)
            self.partitions.update(new)
        stamped: dict[TopicPartition, list[bytes]] = {}
        for tp, bs in batches.items():
            out = stamped[tp] = []
            for b in bs:
                seq = self.sequences.get(tp, 0)
                data, count = stamp(b, self.handle.producer_id, self.handle.epoch, seq)
                self.sequences[tp] = (seq + count) & 0x7FFFFFFF  # Kafka's sequences wrap
                out.append(data)
        # a retried Produce resends the same sequences: the broker drops duplicates
        self.client.produce(stamped, transactional_id=self.handle.transactional_id)


def end_all(client: KafkaClient, handles: list[TxnHandle], commit: bool) -> None:
    """Commit (raising on the first failure: a fenced or timed-out transaction
    was aborted, so the batch must fail and be written again) or abort (best
    effort: a fenced transaction is aborted already) every task's transaction."""
    for h in handles:
        try:
            client.end_txn(h.transactional_id, h.producer_id, h.epoch, commit)
        except KafkaError:
            if commit:
                raise


def _batches(buf: memoryview | bytes) -> Iterator[tuple[int, memoryview]]:
    """(last offset, batch) of the whole batches in a Fetch response's records."""
    view = memoryview(buf)
    pos = 0
    while pos + _HEADER_BYTES <= len(view):
        base, length = struct.unpack_from(">qi", view, pos)
        end = pos + 12 + length
        if end > len(view):
            break  # a trailing partial batch
        yield base + struct.unpack_from(">i", view, pos + _LAST_DELTA_AT)[0], view[pos:end]
        pos = end


def read_marker_records(client: KafkaClient, tp: TopicPartition) -> list[tuple[bytes, bytes]]:
    """(key, value) of the committed records of a partition in offset order:
    non-transactional ones, and transactional ones whose producer committed.
    Records of open or aborted transactions are left out."""
    out: list[tuple[bytes, bytes]] = []
    pending: dict[int, list[tuple[bytes, bytes]]] = {}
    offset, end = client.offset_range(tp)
    while offset < end:
        r = client.fetch(tp, offset, 1 << 20, max_wait_ms=0)
        progressed = False
        for last, batch in _batches(r.records):
            if last < offset:
                continue
            (attrs,) = struct.unpack_from(">h", batch, _ATTRIBUTES_AT)
            (producer_id,) = struct.unpack_from(">q", batch, _PRODUCER_AT)
            records = decode_batch(batch)
            if attrs & ATTR_CONTROL:
                done = pending.pop(producer_id, [])
                key = records[0][3] if records else None
                if key is not None and struct.unpack(">hh", key[:4])[1] == CONTROL_COMMIT:
                    out.extend(done)
            else:
                kept = [(k, v) for off, _, _, k, v, _ in records
                        if off >= offset and k is not None and v is not None]
                if attrs & ATTR_TRANSACTIONAL:
                    pending.setdefault(producer_id, []).extend(kept)
                else:
                    out.extend(kept)
            offset, progressed = max(offset, last + 1), True
        if not progressed:
            break
    return out
