"""`__consumer_offsets` records of KIP-848 consumer groups (Kafka's formats).

Keys are non-flexible, led by an int16 naming the record type (Kafka's "key
version"); values are flexible (compact strings and arrays, tagged fields, none
written), led by an int16 value version 0:

    3 ConsumerGroupMetadataKey            group          -> Epoch int32
    4 ConsumerGroupPartitionMetadataKey   group          -> Topics [TopicId uuid, TopicName,
                                                            NumPartitions int32,
                                                            PartitionMetadata [] (empty)]
    5 ConsumerGroupMemberMetadataKey      group, member  -> InstanceId?, RackId?, ClientId,
                                                            ClientHost, SubscribedTopicNames [],
                                                            SubscribedTopicRegex?,
                                                            RebalanceTimeoutMs int32,
                                                            ServerAssignor?
    6 ConsumerGroupTargetAssignmentMetadataKey  group    -> AssignmentEpoch int32
    7 ConsumerGroupTargetAssignmentMemberKey group, member -> TopicPartitions [TopicId,
                                                            Partitions []int32]
    8 ConsumerGroupCurrentMemberAssignmentKey group, member -> MemberEpoch, PreviousMemberEpoch,
                                                            State int8, AssignedPartitions [],
                                                            PartitionsPendingRevocation []
   16 ConsumerGroupRegularExpressionKey   group, regex   -> Topics []string, Version int64,
                                                            Timestamp int64

A null value (tombstone) deletes the record: a member that left, a group deleted.
Writes go in Kafka's order so that a replay rebuilds the same group: member
metadata and group epoch, then target assignment members and its epoch, then
current assignments. A resolved regular expression (16) is group state of its own:
the topics a subscribed regex matched, the metadata version it was resolved against
and when (Kafka's coordinator resolves regexes off the heartbeat and keeps them so).
"""

from __future__ import annotations

import dataclasses
import struct
import uuid

from pybroker.group.records import _Reader, _string

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
RECORD_TYPES = (*range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1), REGULAR_EXPRESSION)
MEMBER_RECORD_TYPES = (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)
#: record types whose key has a second string after the group: a member id or a regex
TWO_STRING_KEYS = (*MEMBER_RECORD_TYPES, REGULAR_EXPRESSION)

#: topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclasses.dataclass(frozen=True)
class ConsumerKey:
    type: int
    group: str
    #: the member id, or the regular expression of a REGULAR_EXPRESSION key
    member: str | None = None


@dataclasses.dataclass
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclasses.dataclass(frozen=True)
class ResolvedRegex:
    """ConsumerGroupRegularExpressionValue: what a regex matched, the topics
    version (ms) it was resolved against, and when (wall-clock ms)."""
    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclasses.dataclass
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


# --- flexible encoding ----------------------------------------------------------------
def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _cstring(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return _uvarint(len(raw) + 1) + raw


def _topic_partitions(assignment: Assignment) -> bytes:
    parts = [_uvarint(len(assignment) + 1)]
    for topic_id, partitions in sorted(assignment.items(), key=lambda kv: kv[0].bytes):
        ordered = sorted(partitions)
        parts += [topic_id.bytes, _uvarint(len(ordered) + 1),
                  struct.pack(f">{len(ordered)}i", *ordered), b"\x00"]
    return b"".join(parts)


def _read_topic_partitions(r: _Reader) -> Assignment:
    out: Assignment = {}
    for _ in range(max(r.array_len(), 0)):
        topic_id = uuid.UUID(bytes=r.raw(16))
        count = max(r.array_len(), 0)
        out[topic_id] = frozenset(r.take(">i") for _ in range(count))
        r.skip_tags()
    return out


def _value_reader(data: bytes) -> _Reader:
    r = _Reader(data, flexible=True)
    r.pos = 2  # value version 0; later versions only add tagged fields
    return r


# --- keys -----------------------------------------------------------------------------
def key(record_type: int, group: str, member: str | None = None) -> bytes:
    """`member` is the member id, or the regex of a REGULAR_EXPRESSION key."""
    out = struct.pack(">h", record_type) + _string(group)
    if record_type in TWO_STRING_KEYS:
        out += _string(member or "")
    return out


def decode_key(data: bytes) -> ConsumerKey | None:
    """The key of a consumer group record, or None for any other record type."""
    r = _Reader(data)
    record_type = r.take(">h")
    if record_type not in RECORD_TYPES:
        return None
    group = r.string() or ""
    member = r.string() or "" if record_type in TWO_STRING_KEYS else None
    return ConsumerKey(record_type, group, member)


# --- values ---------------------------------------------------------------------------
def epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue."""
    return struct.pack(">hi", 0, epoch) + b"\x00"


def decode_epoch_value(data: bytes) -> int:
    return _value_reader(data).take(">i")


def partition_metadata_value(topics: dict[str, tuple[uuid.UUID, int]]) -> bytes:
    parts = [struct.pack(">h", 0), _uvarint(len(topics) + 1)]
    for name, (topic_id, count) in sorted(topics.items()):
        parts += [topic_id.bytes, _cstring(name), struct.pack(">i", count), b"\x01", b"\x00"]
    parts.append(b"\x00")
    return b"".join(parts)


def decode_partition_metadata_value(data: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    r = _value_reader(data)
    out = {}
    for _ in range(max(r.array_len(), 0)):
        topic_id = uuid.UUID(bytes=r.raw(16))
        name = r.string() or ""
        count = r.take(">i")
        for _ in range(max(r.array_len(), 0)):  # per-partition racks, unused since 4.0
            r.take(">i")
            for _ in range(max(r.array_len(), 0)):
                r.string()
            r.skip_tags()
        r.skip_tags()
        out[name] = (topic_id, count)
    return out


def member_metadata_value(m: MemberMetadata) -> bytes:
    parts = [struct.pack(">h", 0), _cstring(m.instance_id), _cstring(m.rack_id),
             _cstring(m.client_id), _cstring(m.client_host),
             _uvarint(len(m.subscribed_topic_names) + 1)]
    parts += [_cstring(t) for t in m.subscribed_topic_names]
    parts += [_cstring(m.subscribed_topic_regex), struct.pack(">i", m.rebalance_timeout_ms),
              _cstring(m.server_assignor), b"\x00"]
    return b"".join(parts)


def decode_member_metadata_value(data: bytes) -> MemberMetadata:
    r = _value_reader(data)
    instance_id, rack_id = r.string(), r.string()
    client_id, client_host = r.string() or "", r.string() or ""
    topics = [r.string() or "" for _ in range(max(r.array_len(), 0))]
    regex = r.string()
    rebalance_timeout = r.take(">i")
    assignor = r.string()
    return MemberMetadata(instance_id, rack_id, client_id, client_host, topics, regex,
                          rebalance_timeout, assignor)


def target_member_value(assignment: Assignment) -> bytes:
    return struct.pack(">h", 0) + _topic_partitions(assignment) + b"\x00"


def decode_target_member_value(data: bytes) -> Assignment:
    return _read_topic_partitions(_value_reader(data))


def current_assignment_value(c: CurrentAssignment) -> bytes:
    return (struct.pack(">hiib", 0, c.member_epoch, c.previous_member_epoch, c.state)
            + _topic_partitions(c.assigned) + _topic_partitions(c.pending_revocation)
            + b"\x00")


def decode_current_assignment_value(data: bytes) -> CurrentAssignment:
    r = _value_reader(data)
    epoch, previous = r.take(">i"), r.take(">i")
    state = r.take(">b")
    assigned = _read_topic_partitions(r)
    pending = _read_topic_partitions(r)
    return CurrentAssignment(epoch, previous, state, assigned, pending)


def regex_value(resolved: ResolvedRegex) -> bytes:
    topics = sorted(resolved.topics)
    return b"".join([struct.pack(">h", 0), _uvarint(len(topics) + 1),
                     *(_cstring(t) for t in topics),
                     struct.pack(">qq", resolved.version, resolved.timestamp_ms), b"\x00"])


def decode_regex_value(data: bytes) -> ResolvedRegex:
    r = _value_reader(data)
    topics = frozenset(r.string() or "" for _ in range(max(r.array_len(), 0)))
    return ResolvedRegex(topics, r.take(">q"), r.take(">q"))
