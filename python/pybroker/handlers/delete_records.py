"""DeleteRecords (21): move partitions' log start offsets forward.

`offset` -1 means the high watermark; anything else outside [0, high
watermark] is OFFSET_OUT_OF_RANGE. Segments wholly below the new log start are
deleted (crash-safely, see `PartitionLog.advance_log_start_offset`), fetches
below it get OFFSET_OUT_OF_RANGE, and `log-start-offset-checkpoint` is written
before answering so the new start survives a crash. As Kafka, a topic whose
cleanup.policy lacks `delete` refuses with POLICY_VIOLATION. The answer's
low_watermark is the log start offset (-1 on error)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

from pybroker.admin.internal_topics import INTERNAL_TOPICS
from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

log = logging.getLogger(__name__)

HIGH_WATERMARK = -1
INVALID_LOW_WATERMARK = -1


@handles(21, (0, 1))
async def handle_delete_records(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    topics = []
    moved = False
    for topic in request.body["topics"]:
        name = topic["name"]
        partitions = []
        for p in topic["partitions"]:
            code, low = await delete_partition(ctx, name, p["partition_index"], p["offset"])
            moved |= code == 0
            partitions.append({"partition_index": p["partition_index"], "low_watermark": low,
                               "error_code": int(code)})
        topics.append({"name": name, "partitions": partitions})
    if moved:
        try:
            ctx.logs.write_checkpoints()
        except OSError as exc:
            log.error("writing checkpoints after DeleteRecords failed: %s. The records are "
                      "deleted; the checkpoint is written again at the next interval. If it "
                      "repeats, check the log dir (disk errors, permissions, space)", exc)
    return {"throttle_time_ms": 0, "topics": topics}


async def delete_partition(ctx: BrokerContext, topic: str, index: int, offset: int
                           ) -> tuple[ErrorCode, int]:
    if topic in INTERNAL_TOPICS:
        # group offsets and transaction state are never cut from the front (Kafka's
        # "Cannot delete records of internal topic")
        return ErrorCode.INVALID_TOPIC_EXCEPTION, INVALID_LOW_WATERMARK
    try:
        partition = ctx.replicas.leader_for(topic, index)
    except KafkaError as exc:
        return exc.code, INVALID_LOW_WATERMARK
    if "delete" not in partition.config["cleanup.policy"]:
        return ErrorCode.POLICY_VIOLATION, INVALID_LOW_WATERMARK
    high_watermark = partition.high_watermark
    if offset == HIGH_WATERMARK:
        offset = high_watermark
    if offset < 0 or offset > high_watermark:
        return ErrorCode.OFFSET_OUT_OF_RANGE, INVALID_LOW_WATERMARK
    plog = partition.log.log
    try:
        if offset > plog.log_start_offset:
            deleted = await anyio.to_thread.run_sync(plog.advance_log_start_offset, offset)
            partition.changed()  # followers' sessions are told the new log start
            log.info("%s-%d: log start offset moved to %d by DeleteRecords (%d segment(s) "
                     "deleted)", topic, index, plog.log_start_offset, deleted)
    except Exception as exc:  # closed under us or an I/O error
        log.warning("DeleteRecords on %s-%d failed: %s; answered KAFKA_STORAGE_ERROR. "
                    "Check the partition's log dir (disk errors, permissions, space)", topic,
                    index, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR, INVALID_LOW_WATERMARK
    return ErrorCode.NONE, plog.log_start_offset
