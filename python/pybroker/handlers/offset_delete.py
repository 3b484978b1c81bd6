"""OffsetDelete (47): drop a group's committed offsets for topics it no longer reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(47, (0, 0))
async def handle_offset_delete(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    topics = [(t["name"], [p["partition_index"] for p in t["partitions"] or []])
              for t in body["topics"] or []]
    code, results = ctx.groups.delete_offsets(body["group_id"], topics)
    return {"error_code": int(code), "throttle_time_ms": 0,
            "topics": [{"name": name, "partitions": [
                {"partition_index": p, "error_code": c} for p, c in codes]}
                for name, codes in results]}
