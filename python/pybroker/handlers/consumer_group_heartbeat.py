"""ConsumerGroupHeartbeat (68): join, heartbeat and leave of KIP-848 consumer groups."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pybroker.handlers.join_group import client_host
from pybroker.handlers.registry import handles
from pybroker.security.acls import Operation, ResourceType
from pybroker.security.authorizer import authorizer_for
from pybroker.security.session import ANONYMOUS

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(68, (0, 1))
async def handle_consumer_group_heartbeat(ctx: BrokerContext, request: Request
                                          ) -> dict[str, Any]:
    return ctx.groups.consumer.heartbeat(request.body, request.version,
                                         request.header.client_id or "", client_host(request),
                                         describable(ctx, request))


def describable(ctx: BrokerContext, request: Request) -> Callable[[str], bool] | None:
    """May the member's principal DESCRIBE a topic: what its group's regexes may match
    (Kafka filters a resolution by the principal of the heartbeat that asked for it).
    None without an authorizer."""
    authorizer = authorizer_for(ctx.config, ctx.admin.backend)
    if authorizer is None:
        return None
    conn = request.connection
    session = getattr(conn, "session", None)
    principal = session.principal if session is not None else ANONYMOUS
    host = conn.host
    return lambda topic: authorizer.authorize(principal, host, Operation.DESCRIBE,
                                              ResourceType.TOPIC, topic)
