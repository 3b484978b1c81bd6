"""ListGroups (16): the groups this coordinator knows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(16, (0, 5))
async def handle_list_groups(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    states = {s.lower() for s in body.get("states_filter") or []}
    types = {t.lower() for t in body.get("types_filter") or []}
    groups = []
    for g in ctx.groups.list_groups():
        # a KIP-848 group: type "consumer", protocol type "consumer", its own states
        kind = "classic" if g.consumer is None else "consumer"
        state = g.state.value if g.consumer is None else g.consumer.state
        protocol_type = (g.protocol_type or "") if g.consumer is None else "consumer"
        if (states and state.lower() not in states) or (types and kind not in types):
            continue
        groups.append({"group_id": g.group_id, "protocol_type": protocol_type,
                       "group_state": state, "group_type": kind})
    return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}
