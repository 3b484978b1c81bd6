"""EndTxn (26): commit or abort the producer's transaction. Answered once
PrepareCommit/PrepareAbort is replicated; the markers follow in the background
(requests for the id meanwhile get CONCURRENT_TRANSACTIONS, clients retry)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

#: the first version that knows PRODUCER_FENCED
PRODUCER_FENCED_VERSION = 2


@handles(26, (0, 3))
async def handle_end_txn(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    if ctx.txn is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        code = await ctx.txn.end_txn(body["transactional_id"], body["producer_id"],
                                     body["producer_epoch"], bool(body["committed"]))
    if code == ErrorCode.PRODUCER_FENCED and request.version < PRODUCER_FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": int(code)}
