"""OffsetCommit (8): store a group's consumed offsets in __consumer_offsets.

As Kafka does, the commit is answered once the offsets partition's ISR has it
(an append with acks=all's rules, bounded by offsets.commit.timeout.ms): a
commit acknowledged by a coordinator that then dies is on its successor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.produce import wait_for_isr
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(8, (2, 9))
async def handle_offset_commit(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    topics = [
        (t["name"], [(p["partition_index"], p["committed_offset"],
                      p["committed_leader_epoch"] if request.version >= 6 else -1,
                      p["committed_metadata"])
                     for p in t["partitions"] or []])
        for t in body["topics"] or []
    ]
    if request.version < 9 and ctx.groups.consumer.is_member(body["group_id"],
                                                              body["member_id"] or ""):
        # Kafka: a KIP-848 member must commit with v9+ (its epoch, not a generation)
        return {"throttle_time_ms": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": p[0],
                                           "error_code": int(ErrorCode.UNSUPPORTED_VERSION)}
                                          for p in parts]} for name, parts in topics]}
    pending = ctx.groups.begin_commit(
        body["group_id"], body["generation_id_or_member_epoch"], body["member_id"] or "",
        body["group_instance_id"] if request.version >= 7 else None, topics)
    stored = ErrorCode.NONE
    if pending.appended is not None:
        answer: dict[str, Any] = {"error_code": 0}
        deadline = request.received_ms + ctx.config["offsets.commit.timeout.ms"] / 1000
        await wait_for_isr(ctx, [(pending.appended.partition, pending.appended.end_offset,
                                  answer)], deadline)
        stored = ErrorCode(answer["error_code"])
    results = ctx.groups.finish_commit(pending, stored)
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": [
            {"partition_index": p, "error_code": int(code)} for p, code in codes]}
            for name, codes in results],
    }
