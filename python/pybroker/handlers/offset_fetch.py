"""OffsetFetch (9): a group's committed offsets (v2+: all of them for null topics;
v8+: several groups per request; v9: a KIP-848 member's epoch is checked). v7+
require_stable: a partition whose transactional commit waits for its marker answers
UNSTABLE_OFFSET_COMMIT (the consumer retries), as Kafka does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(9, (1, 9))
async def handle_offset_fetch(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    stable = request.version >= 7 and bool(body["require_stable"])
    if request.version >= 8:
        return {"throttle_time_ms": 0, "groups": [
            fetch_group(ctx, g["group_id"], g["topics"], g.get("member_id"),
                        g.get("member_epoch", -1) if request.version >= 9 else -1, stable)
            for g in body["groups"] or []]}
    group = fetch_group(ctx, body["group_id"], body["topics"], None, -1, stable)
    if group["error_code"] and request.version < 2:
        # v0-1 have no top-level error: Kafka puts it on every partition asked for
        return {"throttle_time_ms": 0, "error_code": group["error_code"], "topics": [
            {"name": t["name"], "partitions": [
                _no_offset(index, group["error_code"]) for index in t["partition_indexes"] or []]}
            for t in body["topics"] or []]}
    return {"throttle_time_ms": 0, "topics": group["topics"], "error_code": group["error_code"]}


def _no_offset(index: int, error_code: int) -> dict[str, Any]:
    return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
            "metadata": "", "error_code": error_code}


def fetch_group(ctx: BrokerContext, group_id: str, requested: list[dict[str, Any]] | None,
                member_id: str | None, member_epoch: int, stable: bool = False
                ) -> dict[str, Any]:
    # another broker coordinates the group: NOT_COORDINATOR sends the client to look it up
    # again; answering "no offsets" here would make a consumer reset its position
    code = (ctx.groups.coordinator_error(group_id)
            or ctx.groups.consumer.fetch_error(group_id, member_id, member_epoch))
    if code is not None:
        return {"group_id": group_id, "topics": [], "error_code": int(code)}
    topics = None if requested is None else [
        (t["name"], list(t["partition_indexes"] or [])) for t in requested]
    out = []
    for name, parts in ctx.groups.fetch_offsets(group_id, topics):
        partitions = []
        for index, entry in parts:
            if stable and ctx.groups.unstable_offset(group_id, name, index):
                partitions.append(_no_offset(index, int(ErrorCode.UNSTABLE_OFFSET_COMMIT)))
            elif entry is None:
                partitions.append(_no_offset(index, 0))
            else:
                partitions.append({"partition_index": index, "committed_offset": entry.offset,
                                   "committed_leader_epoch": entry.leader_epoch,
                                   "metadata": entry.metadata, "error_code": 0})
        out.append({"name": name, "partitions": partitions})
    return {"group_id": group_id, "topics": out, "error_code": 0}
