"""DescribeTopicPartitions (75, KIP-966): topics in name order, paged by a cursor."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from .helpers import create_topic
from .protoclient import ProtoClient

if TYPE_CHECKING:
    from conftest import Broker

DESCRIBE_TOPIC_PARTITIONS = 75
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42


def describe(pc: ProtoClient, names: list[str], limit: int,
             cursor: tuple[str, int] | None = None) -> dict[str, Any]:
    return pc.request(DESCRIBE_TOPIC_PARTITIONS, 0, {
        "topics": [{"name": n} for n in names], "response_partition_limit": limit,
        "cursor": None if cursor is None else {"topic_name": cursor[0],
                                               "partition_index": cursor[1]}})


def test_pages_follow_the_cursor(broker: Broker, topic_name: str) -> None:
    names = [f"{topic_name}-a", f"{topic_name}-b", f"{topic_name}-c"]
    for name, count in zip(names, (3, 5, 2), strict=True):
        create_topic(broker.bootstrap, name, partitions=count)
    seen: list[tuple[str, int]] = []
    cursors = []
    with ProtoClient(broker.bootstrap) as pc:
        cursor = None
        for _ in range(10):
            page = describe(pc, list(reversed(names)), 4, cursor)
            for topic in page["topics"]:
                assert topic["error_code"] == 0
                assert topic["topic_id"] != uuid.UUID(int=0)
                assert len(topic["partitions"]) <= 4
                seen += [(topic["name"], p["partition_index"]) for p in topic["partitions"]]
                assert all(p["leader_id"] >= 0 and p["isr_nodes"] for p in topic["partitions"])
            nxt = page["next_cursor"]
            if nxt is None:
                break
            cursor = (nxt["topic_name"], nxt["partition_index"])
            cursors.append(cursor)
    assert seen == [(names[0], i) for i in range(3)] + [(names[1], i) for i in range(5)] + \
        [(names[2], i) for i in range(2)]
    assert cursors == [(names[1], 1), (names[2], 0)]


def test_unknown_topic_and_foreign_cursor(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with ProtoClient(broker.bootstrap) as pc:
        page = describe(pc, [topic_name, f"{topic_name}-missing"], 100)
        codes = {t["name"]: t["error_code"] for t in page["topics"]}
        assert codes == {topic_name: 0, f"{topic_name}-missing": UNKNOWN_TOPIC_OR_PARTITION}
        assert page["next_cursor"] is None
        bad = describe(pc, [topic_name], 100, ("not-asked-for", 0))
        assert bad["topics"][0]["error_code"] == INVALID_REQUEST
        # an empty list is every topic
        every = describe(pc, [], 2000)
        assert topic_name in {t["name"] for t in every["topics"]}


def test_elr_lists_are_empty_not_null(broker: Broker, topic_name: str) -> None:
    # Kafka always sends both ELR arrays (empty without ELR); the Java client 4.0 calls
    # .stream() on them, so null breaks kafka-topics.sh --describe, Streams and MM2
    create_topic(broker.bootstrap, topic_name, partitions=2)
    with ProtoClient(broker.bootstrap) as pc:
        page = describe(pc, [topic_name], 100)
    partitions = page["topics"][0]["partitions"]
    assert len(partitions) == 2
    for p in partitions:
        assert p["eligible_leader_replicas"] == []
        assert p["last_known_elr"] == []
