"""CreateTopics (19)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(19, (2, 4))
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
        assignments = [a["broker_ids"] for a in sorted(topic["assignments"],
                                                        key=lambda a: a["partition_index"])]
        try:
            await ctx.admin.create_topic(
                name,
                topic["num_partitions"],
                topic["replication_factor"],
                {c["name"]: c["value"] for c in topic["configs"]},
                assignments or None,
                validate_only=bool(body["validate_only"]),
                timeout_ms=body["timeout_ms"],
            )
        except KafkaError as exc:
            results.append(result(name, exc.code, exc.message))
            continue
        results.append(result(name, ErrorCode.NONE, None))
    return {"throttle_time_ms": 0, "topics": results}


def result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "error_code": int(code), "error_message": message}
