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
    from pybroker.group.offsets import Appended
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(8, (2, 9))
async def handle_offset_commit(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    topics = requested_offsets(body, with_leader_epoch=request.version >= 6)
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
    stored = await commit_stored(ctx, request, pending.appended)
    results = ctx.groups.finish_commit(pending, stored)
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": [
            {"partition_index": p, "error_code": int(code)} for p, code in codes]}
            for name, codes in results],
    }


def requested_offsets(body: dict[str, Any], *, with_leader_epoch: bool
                      ) -> list[tuple[str, list[tuple[int, int, int, str | None]]]]:
    """(topic, [(partition, offset, leader epoch, metadata)]) of an OffsetCommit or
    TxnOffsetCommit request; the leader epoch is -1 in versions without it."""
    return [
        (t["name"], [(p["partition_index"], p["committed_offset"],
                      p["committed_leader_epoch"] if with_leader_epoch else -1,
                      p["committed_metadata"])
                     for p in t["partitions"] or []])
        for t in body["topics"] or []
    ]


async def commit_stored(ctx: BrokerContext, request: Request, appended: Appended | None
                        ) -> ErrorCode:
    """NONE once the offsets partition's ISR has the commit's append (or nothing was
    appended); else why not, waiting at most offsets.commit.timeout.ms."""
    if appended is None:
        return ErrorCode.NONE
    answer: dict[str, Any] = {"error_code": 0}
    deadline = request.received_ms + ctx.config["offsets.commit.timeout.ms"] / 1000
    await wait_for_isr(ctx, [(appended.partition, appended.end_offset, answer)], deadline)
    return ErrorCode(answer["error_code"])
