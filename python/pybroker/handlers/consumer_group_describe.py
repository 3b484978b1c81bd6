"""ConsumerGroupDescribe (69): KIP-848 groups, members and assignments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.describe_groups import with_operations
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(69, (0, 0))
async def handle_consumer_group_describe(ctx: BrokerContext, request: Request
                                         ) -> dict[str, Any]:
    groups = [ctx.groups.consumer.describe(g) for g in request.body["group_ids"] or []]
    if request.body["include_authorized_operations"]:
        with_operations(ctx, request, groups)
    return {"throttle_time_ms": 0, "groups": groups}
