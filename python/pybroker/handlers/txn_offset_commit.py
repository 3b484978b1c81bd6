"""TxnOffsetCommit (28): a transactional producer commits a group's offsets in
its transaction. The group coordinator appends them as the producer's
transactional batch and answers once the ISR has it; they become the group's
committed offsets when the transaction's COMMIT marker reaches that partition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.offset_commit import commit_stored, requested_offsets
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

#: the first version that knows PRODUCER_FENCED
PRODUCER_FENCED_VERSION = 3


@handles(28, (0, 3))
async def handle_txn_offset_commit(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    v3 = request.version >= 3
    topics = requested_offsets(body, with_leader_epoch=request.version >= 2)
    pending = ctx.groups.begin_txn_commit(
        body["group_id"], body["producer_id"], body["producer_epoch"],
        body["generation_id"] if v3 else -1, (body["member_id"] or "") if v3 else "",
        body["group_instance_id"] if v3 else None, topics)
    stored = await commit_stored(ctx, request, pending.appended)
    results = ctx.groups.finish_txn_commit(pending, stored)

    def code_for(code: ErrorCode) -> int:
        if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
            code = (ErrorCode.PRODUCER_FENCED if request.version >= PRODUCER_FENCED_VERSION
                    else ErrorCode.INVALID_PRODUCER_EPOCH)
        return int(code)

    return {
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": [
            {"partition_index": p, "error_code": code_for(code)} for p, code in codes]}
            for name, codes in results],
    }
