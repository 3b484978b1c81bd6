"""AlterPartitionReassignments (45): start or cancel partition moves (controller)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import KafkaError
from pybroker.handlers.controller_only import active_controller, forwarded
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(45, (0, 0))
async def handle_alter_partition_reassignments(ctx: BrokerContext, request: Request
                                               ) -> dict[str, Any]:
    topics = request.body["topics"]
    try:
        answer = await forwarded(ctx, request)
        if answer is not None:
            return answer
        controller = active_controller(ctx)
        wanted = {t["name"]: {p["partition_index"]: (None if p["replicas"] is None
                                                     else list(p["replicas"]))
                              for p in t["partitions"]} for t in topics}
        results = await controller.alter_reassignments(wanted)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": int(exc.code),
                "error_message": exc.message, "responses": []}
    responses = []
    for topic in topics:
        partitions = []
        for p in topic["partitions"]:
            error = results.get((topic["name"], p["partition_index"]))
            partitions.append({"partition_index": p["partition_index"],
                               "error_code": 0 if error is None else int(error.code),
                               "error_message": None if error is None else error.message})
        responses.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "responses": responses}
