"""`__consumer_offsets` record formats and the record batches that carry them.

Keys and values are Kafka's (group-coordinator module schemas), big endian,
non-flexible versions written, flexible ones (value v4) also read:

    OffsetCommitKey v1      int16 version=1 | string group | string topic | int32 partition
    OffsetCommitValue v3    int16 3 | int64 offset | int32 leader_epoch | string metadata |
                            int64 commit_timestamp
                            (v0: no leader_epoch; v1: + int64 expire_timestamp at the end)
    GroupMetadataKey v2     int16 version=2 | string group
    GroupMetadataValue v3   int16 3 | string protocol_type | int32 generation |
                            nullable string protocol | nullable string leader |
                            int64 current_state_timestamp (v2+) |
                            array of member: string member_id |
                              nullable string group_instance_id (v3+) | string client_id |
                              string client_host | int32 rebalance_timeout (v1+) |
                              int32 session_timeout | bytes subscription | bytes assignment

A null value is a tombstone: the offset or the group was deleted.

Records travel in uncompressed record batches v2 built here (CRC-32C from the
Rust core); the broker sets the base offset and leader epoch on append.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator

from pybroker._core import crc32c

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

BATCH_HEADER_BYTES = 61
CODEC_MASK = 0x07
CONTROL_FLAG = 0x20
TRANSACTIONAL_FLAG = 0x10


@dataclasses.dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclasses.dataclass(frozen=True)
class GroupKey:
    group: str


@dataclasses.dataclass
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclasses.dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclasses.dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue]


# --- primitive encoding ---------------------------------------------------------------
def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    if value is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(value)) + value


class _Reader:
    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated record")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(out)

    def string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.take(">h")
        return None if n < 0 else self.raw(n).decode()

    def bytes_(self) -> bytes | None:
        n = self.uvarint() - 1 if self.flexible else self.take(">i")
        return None if n < 0 else self.raw(n)

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.take(">i")

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.raw(self.uvarint())


# --- keys and values ------------------------------------------------------------------
def offset_key(group: str, topic: str, partition: int) -> bytes:
    return (struct.pack(">h", OFFSET_KEY_VERSION) + _string(group) + _string(topic)
            + struct.pack(">i", partition))


def group_key(group: str) -> bytes:
    return struct.pack(">h", GROUP_KEY_VERSION) + _string(group)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key's meaning, or None for key versions this broker does not know."""
    r = _Reader(data)
    version = r.take(">h")
    if version in (0, 1):
        group, topic = r.string() or "", r.string() or ""
        return OffsetKey(group, topic, r.take(">i"))
    if version == 2:
        return GroupKey(r.string() or "")
    return None


def offset_value(value: OffsetValue) -> bytes:
    return (struct.pack(">hqi", OFFSET_VALUE_VERSION, value.offset, value.leader_epoch)
            + _string(value.metadata) + struct.pack(">q", value.commit_timestamp))


def decode_offset_value(data: bytes) -> OffsetValue:
    version = struct.unpack_from(">h", data)[0]
    r = _Reader(data, flexible=version >= 4)
    r.pos = 2
    offset = r.take(">q")
    epoch = r.take(">i") if version >= 3 else -1
    metadata = r.string() or ""
    commit = r.take(">q")
    expire = r.take(">q") if version == 1 else -1
    return OffsetValue(offset, epoch, metadata, commit, expire)


def group_value(value: GroupValue) -> bytes:
    parts = [struct.pack(">h", GROUP_VALUE_VERSION), _string(value.protocol_type),
             struct.pack(">i", value.generation), _string(value.protocol), _string(value.leader),
             struct.pack(">qi", value.current_state_timestamp, len(value.members))]
    for m in value.members:
        parts += [_string(m.member_id), _string(m.group_instance_id), _string(m.client_id),
                  _string(m.client_host), struct.pack(">ii", m.rebalance_timeout,
                                                      m.session_timeout),
                  _bytes(m.subscription), _bytes(m.assignment)]
    return b"".join(parts)


def decode_group_value(data: bytes) -> GroupValue:
    version = struct.unpack_from(">h", data)[0]
    r = _Reader(data, flexible=version >= 4)
    r.pos = 2
    protocol_type = r.string() or ""
    generation = r.take(">i")
    protocol = r.string()
    leader = r.string()
    timestamp = r.take(">q") if version >= 2 else -1
    members = []
    for _ in range(max(r.array_len(), 0)):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        session = rebalance = r.take(">i")
        if version >= 1:
            session = r.take(">i")
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        r.skip_tags()
        members.append(MemberValue(member_id, instance, client_id, client_host, rebalance,
                                   session, subscription, assignment))
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, members)


# --- record batches -------------------------------------------------------------------
def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def build_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int, *,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                transactional: bool = False) -> bytes:
    """One uncompressed magic-2 batch holding (key, value) records, base offset 0
    (a transactional producer's batch when transactional: TxnOffsetCommit)."""
    if not records:
        raise ValueError("a batch needs at least one record")
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        record = (b"\x00" + _varint(0) + _varint(delta) + _varint(len(key)) + key
                  + (_varint(-1) if value is None else _varint(len(value)) + value)
                  + _varint(0))
        body += _varint(len(record)) + record
    # attributes .. end: the part the CRC covers
    attributes = TRANSACTIONAL_FLAG if transactional else 0
    tail = struct.pack(">hiqqqhii", attributes, len(records) - 1, timestamp_ms, timestamp_ms,
                       producer_id, producer_epoch, base_sequence, len(records)) + bytes(body)
    after_length = struct.pack(">ib", -1, 2) + struct.pack(">I", crc32c(tail)) + tail
    return struct.pack(">qi", 0, len(after_length)) + after_length


def iter_records(data: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in uncompressed, non-control batches; a
    skipped batch yields (its last offset, None, None) so readers can move past it."""
    for pos, base_offset in _complete_batches(data):
        attributes = struct.unpack_from(">h", data, pos + 21)[0]
        count = struct.unpack_from(">i", data, pos + 57)[0]
        if attributes & CODEC_MASK or attributes & CONTROL_FLAG:
            last_delta = struct.unpack_from(">i", data, pos + 23)[0]
            yield base_offset + last_delta, None, None
            continue
        rpos = pos + BATCH_HEADER_BYTES
        for _ in range(count):
            _, rpos = _read_varint(data, rpos)  # record length
            rpos += 1  # attributes
            _, rpos = _read_varint(data, rpos)  # timestamp delta
            delta, rpos = _read_varint(data, rpos)
            klen, rpos = _read_varint(data, rpos)
            key = None if klen < 0 else data[rpos:rpos + klen]
            rpos += max(klen, 0)
            vlen, rpos = _read_varint(data, rpos)
            value = None if vlen < 0 else data[rpos:rpos + vlen]
            rpos += max(vlen, 0)
            headers, rpos = _read_varint(data, rpos)
            for _ in range(headers):
                hlen, rpos = _read_varint(data, rpos)
                rpos += hlen
                hvlen, rpos = _read_varint(data, rpos)
                rpos += max(hvlen, 0)
            yield base_offset + delta, key, value


@dataclasses.dataclass(frozen=True)
class TxnBatchInfo:
    """The producer fields of a transactional batch (data or control)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_offset_delta: int
    #: for a control batch: True COMMIT, False ABORT; None for a data batch
    commit: bool | None


def txn_batch_info(data: bytes) -> Iterator[tuple[int, TxnBatchInfo | None]]:
    """(base offset, its TxnBatchInfo or None when not transactional) of every
    complete batch in `data`, in order (iter_records gives their records)."""
    for pos, base_offset in _complete_batches(data):
        attributes, last_delta = struct.unpack_from(">hi", data, pos + 21)
        producer_id, epoch, base_seq = struct.unpack_from(">qhi", data, pos + 43)
        info = None
        if attributes & TRANSACTIONAL_FLAG:
            commit = None
            if attributes & CONTROL_FLAG:
                # one record; its key: int16 version | int16 type (0 ABORT, 1 COMMIT)
                _, rpos = _read_varint(data, pos + BATCH_HEADER_BYTES)  # record length
                _, rpos = _read_varint(data, rpos + 1)  # attributes, timestamp delta
                _, rpos = _read_varint(data, rpos)  # offset delta
                klen, rpos = _read_varint(data, rpos)
                commit = klen >= 4 and struct.unpack_from(">h", data, rpos + 2)[0] == 1
            info = TxnBatchInfo(producer_id, epoch, base_seq, last_delta, commit)
        yield base_offset, info


def _complete_batches(data: bytes) -> Iterator[tuple[int, int]]:
    """(position, base offset) of every complete batch in `data`, in order; a batch cut
    short at the end (a fetch's last, partial one) ends the walk."""
    pos = 0
    while pos + BATCH_HEADER_BYTES <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if end > len(data):
            return
        yield pos, base_offset
        pos = end
