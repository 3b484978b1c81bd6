"""`__transaction_state` record formats (Kafka's transaction-coordinator schemas),
big endian; version 0 written, flexible version 1 also read:

    TransactionLogKey v0    int16 version=0 | string transactional_id
    TransactionLogValue v0  int16 version=0 | int64 producer_id | int16 producer_epoch |
                            int32 transaction_timeout_ms | int8 transaction_status |
                            nullable array of partitions:
                              string topic | array of int32 partition_ids |
                            int64 transaction_last_update_timestamp_ms |
                            int64 transaction_start_timestamp_ms
    (v1 is the same fields in flexible form: compact strings and arrays, tagged
    fields after each struct; its tags (previous/next producer id, client
    transaction version) are skipped.)

transaction_status is TxnState's value. A null value is a tombstone: the
transactional id expired. Records travel in the uncompressed batches of
group/records.py."""

from __future__ import annotations

import dataclasses
import enum
import struct

from pybroker.group.records import _Reader, _string

KEY_VERSION = 0
VALUE_VERSION = 0


class TxnState(enum.IntEnum):
    """Kafka's TransactionState ids (the byte stored in the log)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions / ListTransactions use (Kafka's stateName)."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}


@dataclasses.dataclass(frozen=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    #: topic -> sorted partitions
    partitions: dict[str, list[int]]
    last_update_ms: int
    start_ms: int


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key version this broker does not know."""
    reader = _Reader(data)
    version = reader.take(">h")
    if version != KEY_VERSION:
        return None
    return reader.string() or ""


def encode_value(value: TxnValue) -> bytes:
    out = bytearray(struct.pack(">hqhib", VALUE_VERSION, value.producer_id,
                                value.producer_epoch, value.timeout_ms, int(value.state)))
    out += struct.pack(">i", len(value.partitions))
    for topic in sorted(value.partitions):
        ids = value.partitions[topic]
        out += _string(topic) + struct.pack(">i", len(ids))
        out += b"".join(struct.pack(">i", p) for p in ids)
    out += struct.pack(">qq", value.last_update_ms, value.start_ms)
    return bytes(out)


def decode_value(data: bytes) -> TxnValue:
    reader = _Reader(data)
    version = reader.take(">h")
    if version not in (0, 1):
        raise ValueError(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    reader = _Reader(data, flexible)
    reader.take(">h")
    producer_id = reader.take(">q")
    epoch = reader.take(">h")
    timeout = reader.take(">i")
    state = TxnState(reader.take(">b"))
    partitions: dict[str, list[int]] = {}
    count = reader.array_len()
    for _ in range(max(count, 0)):
        topic = reader.string() or ""
        ids = [reader.take(">i") for _ in range(reader.array_len())]
        if flexible:
            reader.skip_tags()
        partitions[topic] = ids
    last_update = reader.take(">q")
    start = reader.take(">q")
    return TxnValue(producer_id, epoch, timeout, state, partitions, last_update, start)
