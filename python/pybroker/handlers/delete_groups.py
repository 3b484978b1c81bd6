"""DeleteGroups (42): remove empty groups and their committed offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(42, (0, 1))
async def handle_delete_groups(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    results = ctx.groups.delete_groups(request.body["groups_names"] or [])
    return {"throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": int(code)} for g, code in results]}
