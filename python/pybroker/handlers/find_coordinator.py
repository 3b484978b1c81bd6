"""FindCoordinator (10): a group's coordinator is the leader of its
`__consumer_offsets` partition (created here on first use, as Kafka does);
transactions have no coordinator yet."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.group.offsets import OFFSETS_TOPIC, partition_for
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

KEY_TYPE_GROUP = 0


@handles(10, (0, 2))
async def handle_find_coordinator(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    key_type = request.body["key_type"] if request.version >= 1 else KEY_TYPE_GROUP
    if key_type != KEY_TYPE_GROUP:
        code = (ErrorCode.COORDINATOR_NOT_AVAILABLE if key_type == 1
                else ErrorCode.INVALID_REQUEST)
        return {"throttle_time_ms": 0, "error_code": int(code), "error_message": code.name,
                "node_id": -1, "host": "", "port": -1}
    if not request.body["key"] and request.version >= 1:
        code = ErrorCode.INVALID_REQUEST
        return {"throttle_time_ms": 0, "error_code": int(code),
                "error_message": "group id must not be empty", "node_id": -1, "host": "",
                "port": -1}
    await ctx.groups.store_ready()
    offsets = ctx.metadata.topic(OFFSETS_TOPIC)
    leader = None
    if offsets is not None:
        leader = ctx.metadata.leader(OFFSETS_TOPIC,
                                     partition_for(request.body["key"], len(offsets.partitions)))
    if leader is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return {"throttle_time_ms": 0, "error_code": int(code), "error_message": code.name,
                "node_id": -1, "host": "", "port": -1}
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "node_id": leader.node_id, "host": leader.host, "port": leader.port}
