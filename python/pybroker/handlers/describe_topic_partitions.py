"""DescribeTopicPartitions (75): topics and partitions, paged with a cursor (KIP-966).

As Kafka's handler: the topics asked for (all topics for an empty list), in name
order, from the request's cursor on; at most min(response_partition_limit,
max.request.partition.size.limit) partitions per answer, with `next_cursor` naming the
first partition left out (null when nothing is). A topic the cursor names must be one
asked for, and its partition not negative (else every topic asked for answers
INVALID_REQUEST); unknown topics answer UNKNOWN_TOPIC_OR_PARTITION. Every topic answered
carries the client's authorized operations on it (there is no include flag), and each
partition its leader epoch and ELR lists (empty: no ELR), with error 0 also when its
leader is not available."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.metadata import INTERNAL_TOPICS, topic_metadata
from pybroker.handlers.registry import handles
from pybroker.protocol.types import ZERO_UUID
from pybroker.security.acls import ResourceType
from pybroker.security.authorizer import authorizer_for
from pybroker.security.operations import NOT_REQUESTED, authorized_operations

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

@handles(75, (0, 0))
async def handle_describe_topic_partitions(ctx: BrokerContext, request: Request
                                           ) -> dict[str, Any]:
    body = request.body
    metadata = ctx.metadata
    asked = [t["name"] for t in body["topics"]]
    names = sorted(set(asked)) if asked else sorted(metadata.topics)
    cursor = body["cursor"]
    start_topic, start_partition = ("", 0) if cursor is None else \
        (cursor["topic_name"], cursor["partition_index"])
    if cursor is not None and ((asked and start_topic not in names) or start_partition < 0):
        # Kafka's handler throws InvalidRequestException: the request's error response
        return {"throttle_time_ms": 0, "next_cursor": None, "topics": [
            error_topic(name, ErrorCode.INVALID_REQUEST) for name in asked]}
    authorizer = authorizer_for(ctx.config, ctx.admin.backend)
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
        operations = authorized_operations(authorizer, request.connection,
                                           ResourceType.TOPIC, name)
        record = metadata.topic(name)
        if record is None:
            topics.append(error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, operations))
            continue
        described = topic_metadata(metadata, record)
        # Kafka fills both ELR lists from the partition's registration: empty without
        # KIP-966 ELR (never null; the Java client calls .stream() on them). Unlike
        # Metadata, a partition without a live leader has no error here (leader -1)
        partitions = [{**p, "error_code": 0, "eligible_leader_replicas": [],
                       "last_known_elr": []}
                      for p in described["partitions"][first:first + remaining]]
        remaining -= len(partitions)
        topics.append({
            "error_code": 0, "name": name, "topic_id": record.topic_id,
            "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
            "topic_authorized_operations": operations,
        })
        if first + len(partitions) < len(record.partitions):
            next_cursor = {"topic_name": name, "partition_index": first + len(partitions)}
            break
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


def error_topic(name: str, code: ErrorCode, operations: int = NOT_REQUESTED) -> dict[str, Any]:
    return {"error_code": int(code), "name": name, "topic_id": ZERO_UUID, "is_internal": False,
            "partitions": [], "topic_authorized_operations": operations}
