"""ListTransactions (66): the transactional ids this broker coordinates, filtered
by state names, producer ids and (v1) how long they have been running."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles
from pybroker.transaction.records import STATE_BY_NAME

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(66, (0, 1))
async def handle_list_transactions(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    names = body["state_filters"] or []
    unknown = [n for n in names if n not in STATE_BY_NAME]
    states = {STATE_BY_NAME[n] for n in names if n in STATE_BY_NAME}
    if ctx.txn is None:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                "unknown_state_filters": unknown, "transaction_states": []}
    if names and not states:
        listed: list[Any] = []  # only unknown states asked for: nothing matches
        code = ErrorCode.NONE
    else:
        code, listed = ctx.txn.list(states or None, set(body["producer_id_filters"] or []) or None,
                                    body["duration_filter"] if request.version >= 1 else -1)
    return {"throttle_time_ms": 0, "error_code": int(code), "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": md.transactional_id,
                                    "producer_id": md.producer_id,
                                    "transaction_state": md.state.kafka_name}
                                   for md in listed]}
