"""WriteTxnMarkers (27): write the COMMIT or ABORT marker of each transaction in
the request to the partitions this broker leads (transaction/markers.py), and
answer per marker and partition once the ISR has them.

The markers of one request are written concurrently: each waits for its own
partitions' ISR, and the answer goes when all are settled (Kafka's
DelayedProduce per marker, answered together)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles
from pybroker.transaction.markers import write_markers

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(27, (1, 1))  # v0 was removed in Kafka 4.0 (KIP-896)
async def handle_write_txn_markers(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    markers = request.body["markers"]
    results: list[dict[tuple[str, int], ErrorCode]] = [{} for _ in markers]

    async def one(i: int, marker: dict[str, Any]) -> None:
        partitions = [(t["name"], p) for t in marker["topics"] for p in t["partition_indexes"]]
        results[i] = await write_markers(
            ctx, producer_id=marker["producer_id"], producer_epoch=marker["producer_epoch"],
            coordinator_epoch=marker["coordinator_epoch"],
            commit=bool(marker["transaction_result"]), partitions=partitions)

    async with anyio.create_task_group() as tg:
        for i, marker in enumerate(markers):
            tg.start_soon(one, i, marker)
    return {"markers": [
        {"producer_id": marker["producer_id"], "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p,
                 # a partition without a result was not written: never reported as done
                 "error_code": int(results[i].get((t["name"], p),
                                                  ErrorCode.UNKNOWN_SERVER_ERROR))}
                for p in t["partition_indexes"]]}
            for t in marker["topics"]]}
        for i, marker in enumerate(markers)]}
