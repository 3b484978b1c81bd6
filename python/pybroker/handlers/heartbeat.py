"""Heartbeat (12): keeps a member alive and tells it when to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.broker import Broker
    from pybroker.server.dispatch import Request


@handles(12, (0, 3))
async def handle_heartbeat(broker: Broker, request: Request) -> dict[str, Any]:
    body = request.body
    code = broker.groups.heartbeat(
        body["group_id"], body["generation_id"], body["member_id"] or "",
        body["group_instance_id"] if request.version >= 3 else None)
    return {"throttle_time_ms": 0, "error_code": int(code)}
