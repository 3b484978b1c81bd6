"""AddOffsetsToTxn (25): add the group's `__consumer_offsets` partition to the
producer's transaction, so its TxnOffsetCommit gets the transaction's marker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.group.offsets import OFFSETS_TOPIC
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

#: the first version that knows PRODUCER_FENCED
PRODUCER_FENCED_VERSION = 2


@handles(25, (0, 3))
async def handle_add_offsets_to_txn(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    if ctx.txn is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        await ctx.groups.store_ready()
        partition = ctx.groups.store.partition_of(body["group_id"])
        code = await ctx.txn.add_partitions(body["transactional_id"], body["producer_id"],
                                            body["producer_epoch"], [(OFFSETS_TOPIC, partition)])
    if code == ErrorCode.PRODUCER_FENCED and request.version < PRODUCER_FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": int(code)}
