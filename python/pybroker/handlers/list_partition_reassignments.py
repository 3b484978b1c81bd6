"""ListPartitionReassignments (46): the moves in progress (controller)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import KafkaError
from pybroker.handlers.controller_only import active_controller, forwarded
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(46, (0, 0))
async def handle_list_partition_reassignments(ctx: BrokerContext, request: Request
                                              ) -> dict[str, Any]:
    asked = request.body["topics"]
    wanted = None if asked is None else [(t["name"], i) for t in asked
                                         for i in t["partition_indexes"]]
    try:
        answer = await forwarded(ctx, request)
        if answer is not None:
            return answer
        moving = active_controller(ctx).list_reassignments(wanted)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": int(exc.code),
                "error_message": exc.message, "topics": []}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, index), (replicas, adding, removing) in moving.items():
        topics.setdefault(name, []).append({
            "partition_index": index, "replicas": replicas, "adding_replicas": adding,
            "removing_replicas": removing})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}
