"""DescribeTopicPartitions (75): topics and partitions, paged with a cursor (KIP-966).

As Kafka's handler: the topics asked for (all topics for an empty list), in name
order, from the request's cursor on; at most min(response_partition_limit,
max.request.partition.size.limit) partitions per answer, with `next_cursor` naming the
first partition left out (null when nothing is). A topic the cursor names must be one
asked for (INVALID_REQUEST otherwise); unknown topics answer
UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.metadata import INTERNAL_TOPICS, topic_metadata
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

ZERO_ID = bytes(16)


@handles(75, (0, 0))
async def handle_describe_topic_partitions(ctx: BrokerContext, request: Request
                                           ) -> dict[str, Any]:
    body = request.body
    metadata = ctx.metadata
    asked = [t["name"] for t in body["topics"]]
    names = sorted(set(asked)) if asked else sorted(metadata.topics)
    cursor = body["cursor"]
    start_topic, start_partition = ("", 0) if cursor is None else \
        (cursor["topic_name"], max(0, cursor["partition_index"]))
    if cursor is not None and asked and start_topic not in names:
        return {"throttle_time_ms": 0, "topics": [error_topic(start_topic,
                                                              ErrorCode.INVALID_REQUEST)],
                "next_cursor": None}
    remaining = min(body["response_partition_limit"],
                    ctx.config["max.request.partition.size.limit"])
    remaining = max(remaining, 1)
    topics: list[dict[str, Any]] = []
    next_cursor = None
    for name in (n for n in names if n >= start_topic):
        first = start_partition if name == start_topic else 0
        if remaining <= 0:
            next_cursor = {"topic_name": name, "partition_index": first}
            break
        record = metadata.topic(name)
        if record is None:
            topics.append(error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        described = topic_metadata(metadata, record)
        # Kafka fills both ELR lists from the partition's registration: empty without
        # KIP-966 ELR (never null; the Java client calls .stream() on them)
        partitions = [{**p, "eligible_leader_replicas": [], "last_known_elr": []}
                      for p in described["partitions"][first:first + remaining]]
        remaining -= len(partitions)
        topics.append({
            "error_code": 0, "name": name, "topic_id": record.topic_id.bytes,
            "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
            "topic_authorized_operations": -2147483648,
        })
        if first + len(partitions) < len(record.partitions):
            next_cursor = {"topic_name": name, "partition_index": first + len(partitions)}
            break
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


def error_topic(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "name": name, "topic_id": ZERO_ID, "is_internal": False,
            "partitions": [], "topic_authorized_operations": -2147483648}
