"""ListGroups (16): the groups this coordinator knows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(16, (0, 2))
async def handle_list_groups(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or ""}
              for g in ctx.groups.list_groups()]
    return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}
