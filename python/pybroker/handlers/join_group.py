"""JoinGroup (11): first phase of a rebalance; waits until the group has formed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


def client_host(request: Request) -> str:
    """Kafka shows a member's host as `/address`."""
    host = request.connection.peer.rsplit(":", 1)[0]
    return "/" + host.strip("[]")


@handles(11, (0, 5))
async def handle_join_group(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    return await ctx.groups.join_group(
        group_id=body["group_id"],
        member_id=body["member_id"] or "",
        group_instance_id=body["group_instance_id"] if request.version >= 5 else None,
        protocol_type=body["protocol_type"] or "",
        protocols=[(p["name"], bytes(p["metadata"] or b"")) for p in body["protocols"] or []],
        session_timeout_ms=body["session_timeout_ms"],
        rebalance_timeout_ms=body["rebalance_timeout_ms"] if request.version >= 1 else -1,
        client_id=request.header.client_id or "",
        client_host=client_host(request),
        version=request.version,
    )
