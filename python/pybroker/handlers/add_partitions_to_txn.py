"""AddPartitionsToTxn (24), the client path (v0-3): add partitions to the
producer's ongoing transaction. One error for every partition, as Kafka
answers: partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION and the
others OPERATION_NOT_ATTEMPTED."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

#: the first version that knows PRODUCER_FENCED
PRODUCER_FENCED_VERSION = 2


@handles(24, (0, 3))
async def handle_add_partitions_to_txn(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    wanted = [(t["name"], p) for t in body["v3_and_below_topics"] or []
              for p in t["partitions"] or []]
    codes: dict[tuple[str, int], ErrorCode] = {}
    unknown = {tp for tp in wanted if ctx.metadata.partition(*tp) is None}
    if unknown:
        codes = {tp: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                      else ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    else:
        if ctx.txn is None:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            code = await ctx.txn.add_partitions(
                body["v3_and_below_transactional_id"], body["v3_and_below_producer_id"],
                body["v3_and_below_producer_epoch"], wanted)
        if code == ErrorCode.PRODUCER_FENCED and request.version < PRODUCER_FENCED_VERSION:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        codes = {tp: code for tp in wanted}
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "partition_error_code": int(code)})
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]}
