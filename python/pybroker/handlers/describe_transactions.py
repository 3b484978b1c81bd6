"""DescribeTransactions (65): the state of transactional ids this broker
coordinates (NOT_COORDINATOR for the others, TRANSACTIONAL_ID_NOT_FOUND for
unknown ones)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(65, (0, 0))
async def handle_describe_transactions(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    states = []
    for txn_id in request.body["transactional_ids"] or []:
        if ctx.txn is None:
            code, md = ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        else:
            code, md = ctx.txn.describe(txn_id)
        if md is None:
            states.append({"error_code": int(code), "transactional_id": txn_id,
                           "transaction_state": "", "transaction_timeout_ms": 0,
                           "transaction_start_time_ms": -1, "producer_id": -1,
                           "producer_epoch": -1, "topics": []})
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(md.partitions):
            by_topic.setdefault(topic, []).append(index)
        states.append({"error_code": 0, "transactional_id": txn_id,
                       "transaction_state": md.state.kafka_name,
                       "transaction_timeout_ms": md.timeout_ms,
                       "transaction_start_time_ms": md.start_ms,
                       "producer_id": md.producer_id, "producer_epoch": md.producer_epoch,
                       "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"throttle_time_ms": 0, "transaction_states": states}
