"""KIP-848 `__consumer_offsets` records: Kafka's byte layouts, and round trips."""

from __future__ import annotations

import struct
import uuid

from pybroker.group import records as classic
from pybroker.group.consumer import records as crec

TOPIC = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_keys_lead_with_the_record_type() -> None:
    assert crec.key(crec.GROUP_METADATA, "g") == b"\x00\x03\x00\x01g"
    assert crec.key(crec.MEMBER_METADATA, "g", "m") == b"\x00\x05\x00\x01g\x00\x01m"
    assert crec.decode_key(crec.key(crec.CURRENT_MEMBER_ASSIGNMENT, "g", "m")) == \
        crec.ConsumerKey(8, "g", "m")
    assert crec.decode_key(classic.group_key("g")) is None  # a classic record
    assert classic.decode_key(crec.key(crec.GROUP_METADATA, "g")) is None


def test_epoch_values_are_flexible_v0() -> None:
    assert crec.epoch_value(7) == b"\x00\x00" + struct.pack(">i", 7) + b"\x00"
    assert crec.decode_epoch_value(crec.epoch_value(7)) == 7


def test_current_assignment_layout_and_round_trip() -> None:
    value = crec.CurrentAssignment(5, 4, 1, {TOPIC: frozenset({2, 0})}, {})
    raw = crec.current_assignment_value(value)
    # version, epoch, previous epoch, state, 1 topic (uuid, [0, 2], no tags), 0 pending, no tags
    assert raw == (b"\x00\x00" + struct.pack(">iib", 5, 4, 1) + b"\x02" + TOPIC.bytes
                   + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00" + b"\x01" + b"\x00")
    assert crec.decode_current_assignment_value(raw) == value


def test_member_and_partition_metadata_round_trip() -> None:
    meta = crec.MemberMetadata("inst", None, "client", "/h", ["a", "b"], "x.*", 30000, "range")
    assert crec.decode_member_metadata_value(crec.member_metadata_value(meta)) == meta
    topics = {"t": (TOPIC, 6)}
    assert crec.decode_partition_metadata_value(crec.partition_metadata_value(topics)) == topics
    target = {TOPIC: frozenset({1, 3})}
    assert crec.decode_target_member_value(crec.target_member_value(target)) == target


def test_regular_expression_record_layout_and_round_trip() -> None:
    # ConsumerGroupRegularExpressionKey (type 16): group, regex; non-flexible strings
    assert crec.key(crec.REGULAR_EXPRESSION, "g", "a.*") == b"\x00\x10\x00\x01g\x00\x03a.*"
    assert crec.decode_key(crec.key(crec.REGULAR_EXPRESSION, "g", "a.*")) == \
        crec.ConsumerKey(16, "g", "a.*")
    resolved = crec.ResolvedRegex(frozenset({"ab", "a"}), 42, 1700000000000)
    raw = crec.regex_value(resolved)
    # value v0, flexible: compact array of compact strings (sorted), int64 version,
    # int64 timestamp, no tagged fields
    assert raw == (b"\x00\x00" + b"\x03" + b"\x02a" + b"\x03ab"
                   + struct.pack(">qq", 42, 1700000000000) + b"\x00")
    assert crec.decode_regex_value(raw) == resolved
    assert classic.decode_key(crec.key(crec.REGULAR_EXPRESSION, "g", "a.*")) is None
