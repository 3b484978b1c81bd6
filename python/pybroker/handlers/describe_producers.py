"""DescribeProducers (61): the producer state of partitions this broker leads
(NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION for the others)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(61, (0, 0))
async def handle_describe_producers(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    topics = []
    for topic in request.body["topics"] or []:
        partitions = []
        for index in topic["partition_indexes"] or []:
            try:
                partition = ctx.replicas.leader_for(topic["name"], index)
            except KafkaError as exc:
                partitions.append({"partition_index": index, "error_code": int(exc.code),
                                   "error_message": exc.message, "active_producers": []})
                continue
            partitions.append({"partition_index": index, "error_code": 0, "error_message": None,
                               "active_producers": [
                {"producer_id": pid, "producer_epoch": epoch, "last_sequence": seq,
                 "last_timestamp": ts, "coordinator_epoch": coordinator_epoch,
                 "current_txn_start_offset": txn_start}
                for pid, epoch, seq, ts, coordinator_epoch, txn_start
                in partition.log.log.producers()]})
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
