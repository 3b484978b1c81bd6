"""InitProducerId (22): a producer id and epoch for an idempotent producer.

Transactions are not supported yet: a transactional id gets a fatal error
rather than an id whose transactions would silently not be honoured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(22, (0, 1))
async def handle_init_producer_id(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    if request.body["transactional_id"] is not None:
        return {"throttle_time_ms": 0,
                "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": 0,
            "producer_id": await ctx.producer_ids.next_id(), "producer_epoch": 0}
