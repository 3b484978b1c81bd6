"""OffsetFetch (9): a group's committed offsets (v2+: all of them for null topics).
v7 require_stable: a partition with a transactional commit waiting for its marker
answers UNSTABLE_OFFSET_COMMIT (the consumer retries), as Kafka does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(9, (1, 7))
async def handle_offset_fetch(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    requested = body["topics"]
    topics = None if requested is None else [
        (t["name"], list(t["partition_indexes"] or [])) for t in requested]
    results = ctx.groups.fetch_offsets(body["group_id"], topics)
    stable = request.version >= 7 and body["require_stable"]
    out = []
    for name, parts in results:
        partitions = []
        for index, entry in parts:
            if stable and ctx.groups.unstable_offset(body["group_id"], name, index):
                partitions.append({"partition_index": index, "committed_offset": -1,
                                   "committed_leader_epoch": -1, "metadata": "",
                                   "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT)})
            elif entry is None:
                partitions.append({"partition_index": index, "committed_offset": -1,
                                   "committed_leader_epoch": -1, "metadata": "",
                                   "error_code": 0})
            else:
                partitions.append({"partition_index": index, "committed_offset": entry.offset,
                                   "committed_leader_epoch": entry.leader_epoch,
                                   "metadata": entry.metadata, "error_code": 0})
        out.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": out, "error_code": 0}
