"""CreatePartitions (37): grow a topic's partition count."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(37, (0, 1))
async def handle_create_partitions(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    results = []
    for topic in body["topics"]:
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
