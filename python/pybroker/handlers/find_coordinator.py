"""FindCoordinator (10): a group's coordinator is the leader of its
`__consumer_offsets` partition, a transactional id's the leader of its
`__transaction_state` partition (each topic created here on first use, as
Kafka does)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.group.offsets import OFFSETS_TOPIC, partition_for
from pybroker.handlers.registry import handles
from pybroker.security.session import listener_of
from pybroker.transaction.log import TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


def _error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code),
            "error_message": message or code.name, "node_id": -1, "host": "", "port": -1}


@handles(10, (0, 2))
async def handle_find_coordinator(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    key_type = request.body["key_type"] if request.version >= 1 else KEY_TYPE_GROUP
    key = request.body["key"]
    if key_type == KEY_TYPE_TRANSACTION:
        if ctx.txn is None:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not key:
            return _error(ErrorCode.INVALID_REQUEST, "transactional id must not be empty")
        try:
            await ctx.txn.store.ensure()
        except Exception:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        topic, index = TRANSACTION_STATE_TOPIC, ctx.txn.store.partition_of(key)
    elif key_type == KEY_TYPE_GROUP:
        if not key and request.version >= 1:
            return _error(ErrorCode.INVALID_REQUEST, "group id must not be empty")
        await ctx.groups.store_ready()
        offsets = ctx.metadata.topic(OFFSETS_TOPIC)
        topic, index = OFFSETS_TOPIC, (partition_for(key, len(offsets.partitions))
                                       if offsets is not None else -1)
    else:
        return _error(ErrorCode.INVALID_REQUEST)
    leader = ctx.metadata.leader(topic, index) if index >= 0 else None
    if leader is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    host, port = leader.address(listener_of(request.connection))
    # v1-3: Kafka sets Errors.message(), which for NONE (no exception) is its name
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": ErrorCode.NONE.name,
            "node_id": leader.node_id, "host": host, "port": port}
