"""OffsetForLeaderEpoch (23): where a leader epoch ended, from the leader's
epoch cache — a returning follower truncates to it (not merely to its high
watermark), and consumers use it to detect truncation (KIP-320)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(23, (2, 3))
async def handle_offset_for_leader_epoch(ctx: BrokerContext, request: Request
                                         ) -> dict[str, Any]:
    topics = []
    for topic in request.body["topics"]:
        name = topic["topic"]
        topics.append({"topic": name,
                       "partitions": [end_offset(ctx, name, p) for p in topic["partitions"]]})
    return {"throttle_time_ms": 0, "topics": topics}


def end_offset(ctx: BrokerContext, topic: str, p: dict[str, Any]) -> dict[str, Any]:
    index = p["partition"]
    try:
        partition = ctx.replicas.leader_for(topic, index, p["current_leader_epoch"])
    except KafkaError as exc:
        return {"error_code": int(exc.code), "partition": index, "leader_epoch": -1,
                "end_offset": -1}
    epoch, offset = partition.log.log.end_offset_for_epoch(p["leader_epoch"])
    return {"error_code": int(ErrorCode.NONE), "partition": index, "leader_epoch": epoch,
            "end_offset": offset}
