"""ConsumerGroupHeartbeat (68): join, heartbeat and leave of KIP-848 consumer groups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.join_group import client_host
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(68, (0, 1))
async def handle_consumer_group_heartbeat(ctx: BrokerContext, request: Request
                                          ) -> dict[str, Any]:
    return ctx.groups.consumer.heartbeat(request.body, request.version,
                                         request.header.client_id or "", client_host(request))
