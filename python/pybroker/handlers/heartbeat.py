"""Heartbeat (12): keeps a member alive and tells it when to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(12, (0, 3))
async def handle_heartbeat(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    code = ctx.groups.heartbeat(
        body["group_id"], body["generation_id"], body["member_id"] or "",
        body["group_instance_id"] if request.version >= 3 else None)
    return {"throttle_time_ms": 0, "error_code": int(code)}
