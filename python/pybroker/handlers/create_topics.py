"""CreateTopics (19); v5+ answers with the topic's shape and configs, v7+ its id.

Answered as Kafka 4.0 answers it: once each topic is written, not once its leaders
are up (admin/topics.py). timeout_ms is the time the request may wait for that; as
in Kafka 4.0, whose controller drops a request whose deadline has passed before it
gets to it, a timeout of 0 or less answers REQUEST_TIMED_OUT for every topic and
creates nothing, validate_only too (librdkafka, sending 0 for operation_timeout=0,
hides that code: it expects the ZooKeeper era, when the topics were still made)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.describe_configs import topic_entries
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(19, (2, 7))
async def handle_create_topics(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    names = [t["name"] for t in body["topics"]]
    results = []
    for topic in body["topics"]:
        name = topic["name"]
        if names.count(name) > 1:
            results.append(result(name, ErrorCode.INVALID_REQUEST,
                                  "Create topics request from client contains duplicate topic"))
            continue
        if body["timeout_ms"] <= 0:
            results.append(result(name, ErrorCode.REQUEST_TIMED_OUT, None))
            continue
        assignments = [a["broker_ids"] for a in sorted(topic["assignments"],
                                                        key=lambda a: a["partition_index"])]
        try:
            record = await ctx.admin.create_topic(
                name,
                topic["num_partitions"],
                topic["replication_factor"],
                {c["name"]: c["value"] for c in topic["configs"]},
                assignments or None,
                validate_only=bool(body["validate_only"]),
                timeout_ms=body["timeout_ms"],
                wait_for_leaders=False,
            )
        except KafkaError as exc:
            results.append(result(name, exc.code, exc.message))
            continue
        created = result(name, ErrorCode.NONE, None)
        if record is not None:
            created |= {
                "topic_id": record.topic_id,
                "num_partitions": len(record.partitions),
                "replication_factor": record.replication_factor,
                # every effective config with its source, as Kafka's
                # computeEffectiveTopicConfigs (validate_only too)
                "configs": topic_entries(ctx, record, synonyms=False, docs=False),
            }
        results.append(created)
    return {"throttle_time_ms": 0, "topics": results}


def result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    # on errors Kafka leaves num_partitions/replication_factor at -1 and configs at
    # its generated default, [] (not null)
    return {"name": name, "error_code": int(code), "error_message": message, "configs": []}
