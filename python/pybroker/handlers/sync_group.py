"""SyncGroup (14): second phase of a rebalance; the leader hands out assignments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(14, (0, 3))
async def handle_sync_group(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    return await ctx.groups.sync_group(
        group_id=body["group_id"],
        generation=body["generation_id"],
        member_id=body["member_id"] or "",
        group_instance_id=body["group_instance_id"] if request.version >= 3 else None,
        assignments=[(a["member_id"], bytes(a["assignment"] or b""))
                     for a in body["assignments"] or []],
    )
