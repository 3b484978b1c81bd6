"""Clients older than Kafka 4.0's protocol baseline (KIP-896) get Kafka 4.0's answer:
the connection is closed, without a response, on a request of a version the broker does
not handle (Kafka's SocketServer refuses a header whose version is not enabled before
any handler runs), while ApiVersions lists what Kafka 4.0 lists: Produce from v0
(KAFKA-18659: librdkafka keeps compression on only then) although v0-2 are refused, and
JoinGroup from v0 (added back in 4.0.1, KAFKA-19444). The requests are the old clients'
own, hand-encoded: Burrow 1.2's ListOffsets v0, sarama 1.22's DescribeConfigs v0 and
OffsetCommit v1, kafka-go 0.2's Produce v2."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from . import rawclient
from .helpers import OP_TIMEOUT_S, create_topic
from .rawclient import RawClient, array, bytes_, i8, i16, i32, i64, string

if TYPE_CHECKING:
    from conftest import Broker

PRODUCE, LIST_OFFSETS, OFFSET_COMMIT, JOIN_GROUP, DESCRIBE_CONFIGS = 0, 2, 8, 11, 32
WRITE_TXN_MARKERS, FIND_COORDINATOR = 27, 10


def produce_v2(topic: str) -> bytes:
    # a v1 message set holding one message (offset, size, crc, magic 1, attributes,
    # timestamp, key, value); the broker must not read it
    message = i8(1) + i8(0) + i64(0) + bytes_(None) + bytes_(b"old")
    entry = i64(0) + i32(4 + len(message)) + i32(0) + message
    return i16(1) + i32(5000) + array([string(topic) + array([i32(0) + bytes_(entry)])])


def list_offsets_v0(topic: str) -> bytes:
    return i32(-1) + array([string(topic) + array([i32(0) + i64(-1) + i32(1)])])


def describe_configs_v0(topic: str) -> bytes:
    return array([i8(2) + string(topic) + array(None)])


def offset_commit_v1(topic: str) -> bytes:
    return string(f"{topic}-g") + i32(-1) + string("") + array([
        string(topic) + array([i32(0) + i64(1) + i64(-1) + string("")])])


def write_txn_markers_v0(topic: str) -> bytes:
    return array([i64(1) + i16(0) + i8(1) + array([string(topic) + array([i32(0)])])
                  + i32(0)])


REFUSED = {
    "kafka-go 0.2 Produce v2": (PRODUCE, 2, produce_v2),
    "Burrow 1.2 ListOffsets v0": (LIST_OFFSETS, 0, list_offsets_v0),
    "sarama 1.22 DescribeConfigs v0": (DESCRIBE_CONFIGS, 0, describe_configs_v0),
    "sarama 1.22 OffsetCommit v1": (OFFSET_COMMIT, 1, offset_commit_v1),
    "WriteTxnMarkers v0": (WRITE_TXN_MARKERS, 0, write_txn_markers_v0),
}


@pytest.mark.parametrize("client", sorted(REFUSED))
def test_refused_version_closes_the_connection(broker: Broker, topic_name: str,
                                               client: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    api_key, version, body = REFUSED[client]
    with RawClient(broker.bootstrap) as rc:
        rc.send(api_key, version, body(topic_name))
        assert rc.is_closed_by_peer(), f"{client}: answered instead of closing"
    with RawClient(broker.bootstrap) as rc:  # the broker serves the next client
        assert rc.api_versions(0).error_code == 0
        assert rc.high_watermark(topic_name) == 0  # and appended nothing


def test_api_versions_lists_kafka_40s_ranges(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as rc:
        ranges = rc.api_versions(0).ranges
    assert ranges[PRODUCE][0] == 0  # advertised from v0 as Kafka 4.0 (KAFKA-18659)
    assert ranges[LIST_OFFSETS][0] == 1
    assert ranges[OFFSET_COMMIT][0] == 2
    assert ranges[DESCRIBE_CONFIGS][0] == 1
    assert ranges[WRITE_TXN_MARKERS][0] == 1
    assert ranges[JOIN_GROUP][0] == 0


def test_join_group_v0_is_answered(broker: Broker, topic_name: str) -> None:
    # v0-1 were added back in Kafka 4.0.1 for librdkafka < 2.11 with Kerberos
    group = f"{topic_name}-g"
    body = (string(group) + i32(10000) + string("") + string("consumer")
            + array([string("range") + bytes_(b"")]))
    with RawClient(broker.bootstrap) as rc:
        deadline = time.monotonic() + OP_TIMEOUT_S
        while rawclient.Reader(rc.request(FIND_COORDINATOR, 0, string(group))).i16() != 0:
            assert time.monotonic() < deadline, "no coordinator"
            time.sleep(0.1)
        reader = rawclient.Reader(rc.request(JOIN_GROUP, 0, body))
    assert reader.i16() == 0  # error_code NONE
    assert reader.i32() >= 1  # generation_id
