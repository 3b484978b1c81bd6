"""OffsetCommit (8): store a group's consumed offsets in __consumer_offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(8, (2, 7))
async def handle_offset_commit(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    topics = [
        (t["name"], [(p["partition_index"], p["committed_offset"],
                      p["committed_leader_epoch"] if request.version >= 6 else -1,
                      p["committed_metadata"])
                     for p in t["partitions"] or []])
        for t in body["topics"] or []
    ]
    results = ctx.groups.commit_offsets(
        body["group_id"], body["generation_id_or_member_epoch"], body["member_id"] or "",
        body["group_instance_id"] if request.version >= 7 else None, topics)
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": [
            {"partition_index": p, "error_code": int(code)} for p, code in codes]}
            for name, codes in results],
    }
