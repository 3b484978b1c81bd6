"""DeleteTopics (20)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(20, (1, 3))
async def handle_delete_topics(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    responses = []
    for name in request.body["topic_names"]:
        try:
            await ctx.admin.delete_topic(name, request.body["timeout_ms"])
            code = 0
        except KafkaError as exc:
            code = int(exc.code)
        responses.append({"name": name, "error_code": code})
    return {"throttle_time_ms": 0, "responses": responses}
