"""A full Metadata answer reuses each topic's encoded entry (issue 25): the bytes are
the ones the dicts would encode to, at every version, and a changed topic or a broker
gone is encoded afresh, never answered from a stale entry."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.handlers.metadata import encoded_topic_metadata, topic_metadata
from pybroker.metadata.cache import BrokerEndpoint, MetadataCache
from pybroker.protocol.frame import encode_response
from pybroker.protocol.messages import APIS


def response(topics: list[Any], version: int) -> bytes:
    body = {"throttle_time_ms": 0, "brokers": [], "cluster_id": "c", "controller_id": 1,
            "topics": topics, "cluster_authorized_operations": -2147483648}
    return b"".join(bytes(p) for p in encode_response(3, version, 7, body))


def cache() -> MetadataCache:
    m = MetadataCache("c")
    m.set_brokers([BrokerEndpoint(1, "127.0.0.1", 9092), BrokerEndpoint(2, "127.0.0.1", 9093)])
    for t in range(3):
        m.update_topic(TopicRecord(f"t{t}", uuid.uuid4(), [
            PartitionState(1 + p % 2, 0, [1 + p % 2, 2 - p % 2], [1, 2]) for p in range(4)],
            {}))
    return m


@pytest.mark.parametrize("version", range(APIS[3].min_version, APIS[3].max_version + 1))
def test_encoded_entries_are_the_dicts_bytes(version: int) -> None:
    m = cache()
    fresh = response([topic_metadata(m, r) for r in m.topics.values()], version)
    for _ in range(2):  # the second time from the cache
        assert response([encoded_topic_metadata(m, r, version)
                         for r in m.topics.values()], version) == fresh


def test_a_changed_topic_or_a_gone_broker_is_encoded_again() -> None:
    m = cache()
    first = encoded_topic_metadata(m, m.topics["t0"], 12)
    assert encoded_topic_metadata(m, m.topics["t0"], 12) is first
    assert first["name"] == "t0"  # the authorizer's filter reads entries by field

    record = m.topics["t0"]
    m.update_topic(TopicRecord("t0", record.topic_id, [
        PartitionState(2, 1, s.replicas, [2]) for s in record.partitions], {}))
    moved = encoded_topic_metadata(m, m.topics["t0"], 12)
    assert moved != first
    assert [p["leader_id"] for p in moved["partitions"]] == [2, 2, 2, 2]

    m.set_brokers([BrokerEndpoint(1, "127.0.0.1", 9092)])
    gone = encoded_topic_metadata(m, m.topics["t0"], 12)
    assert [p["leader_id"] for p in gone["partitions"]] == [-1] * 4
    assert response([gone], 12) == response([topic_metadata(m, m.topics["t0"])], 12)

    m.remove_topic("t0")
    assert not [k for k in m.encoded_topics if k[0] == "t0"]
