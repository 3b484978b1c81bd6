"""InitProducerId (22): a producer id and epoch. An idempotent producer gets a
fresh id; a transactional one goes to its transaction coordinator, which bumps
the epoch (fencing older instances), KIP-360's bump with the producer's current
id/epoch in v3+. PRODUCER_FENCED exists from v4; older versions get
INVALID_PRODUCER_EPOCH, as Kafka answers them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

#: the first version that knows PRODUCER_FENCED
PRODUCER_FENCED_VERSION = 4


@handles(22, (0, 4))
async def handle_init_producer_id(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    txn_id = body["transactional_id"]
    if txn_id is None:
        return {"throttle_time_ms": 0, "error_code": 0,
                "producer_id": await ctx.producer_ids.next_id(), "producer_epoch": 0}
    if ctx.txn is None:
        code, pid, epoch = ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1
    else:
        expected = (body["producer_id"], body["producer_epoch"]) if request.version >= 3 \
            else (-1, -1)
        code, pid, epoch = await ctx.txn.init_producer_id(
            txn_id, body["transaction_timeout_ms"], *expected)
    if code == ErrorCode.PRODUCER_FENCED and request.version < PRODUCER_FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": pid,
            "producer_epoch": epoch}
