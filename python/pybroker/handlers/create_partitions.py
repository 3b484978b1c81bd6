"""CreatePartitions (37): grow a topic's partition count.

Answered once the new assignment is written, not once the new partitions are led
(admin/topics.py). A timeout of 0 or less answers REQUEST_TIMED_OUT for every topic
and changes nothing, validate_only too: Kafka 4.0's controller drops a request whose
deadline has passed before it gets to it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(37, (0, 1))
async def handle_create_partitions(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    results = []
    for topic in body["topics"]:
        if body["timeout_ms"] <= 0:
            results.append({"name": topic["name"],
                            "error_code": int(ErrorCode.REQUEST_TIMED_OUT),
                            "error_message": None})
            continue
        assignments = topic["assignments"]
        try:
            await ctx.admin.create_partitions(
                topic["name"],
                topic["count"],
                [a["broker_ids"] for a in assignments] if assignments is not None else None,
                validate_only=bool(body["validate_only"]),
                timeout_ms=body["timeout_ms"],
            )
            results.append({"name": topic["name"], "error_code": 0, "error_message": None})
        except KafkaError as exc:
            results.append({"name": topic["name"], "error_code": int(exc.code),
                            "error_message": exc.message})
    return {"throttle_time_ms": 0, "results": results}
