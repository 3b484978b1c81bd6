"""ListOffsets (2): earliest, latest, the record with the largest timestamp (v7+,
KIP-734), or the first offset at/after a timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.replica.partition import ReplicaPartition
    from pybroker.server.dispatch import Request

LATEST = -1
EARLIEST = -2
READ_COMMITTED = 1
MAX_TIMESTAMP = -3


@handles(2, (1, 7))
async def handle_list_offsets(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    topics = []
    for topic in request.body["topics"]:
        name = topic["name"]
        partitions = [lookup(ctx, name, p, request.body["replica_id"],
                             request.body["isolation_level"] == READ_COMMITTED)
                      if p["timestamp"] != MAX_TIMESTAMP or request.version >= 7
                      else answer(p["partition_index"], ErrorCode.UNSUPPORTED_VERSION)
                      for p in topic["partitions"]]
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def lookup(ctx: BrokerContext, topic: str, p: dict[str, Any], replica_id: int = -1,
           read_committed: bool = False) -> dict[str, Any]:
    index = p["partition_index"]
    try:
        partition = ctx.replicas.leader_for(topic, index, p["current_leader_epoch"])
    except KafkaError as exc:
        return answer(index, exc.code)
    timestamp = p["timestamp"]
    if timestamp == LATEST:
        # a follower (replica_id set) is told the log end, a client the high watermark
        # (read_committed: the last stable offset)
        end = (partition.log_end_offset if replica_id >= 0
               else partition.last_stable_offset if read_committed
               else partition.high_watermark)
        return answer(index, offset=end, epoch=partition.leader_epoch)
    if timestamp == EARLIEST:
        return answer(index, offset=partition.log_start_offset, epoch=partition.leader_epoch)
    if timestamp == MAX_TIMESTAMP:
        return max_timestamp(partition, index, read_committed)
    if timestamp < 0:
        return answer(index, ErrorCode.UNSUPPORTED_VERSION)
    found = partition.offset_for_timestamp(timestamp)
    if found is None or (read_committed and found[0] >= partition.last_stable_offset):
        # read_committed: nothing at or past the last stable offset (Kafka)
        return answer(index)
    offset, ts = found
    return answer(index, offset=offset, timestamp=ts, epoch=partition.leader_epoch)


def max_timestamp(partition: ReplicaPartition, index: int, read_committed: bool = False
                  ) -> dict[str, Any]:
    """KIP-734: the first record carrying the partition's largest timestamp, found from
    the segments' max timestamps and the time index (no record is read in Python);
    nothing (-1) for an empty log or when that record is not yet committed (at or past
    the high watermark; read_committed: the last stable offset)."""
    largest = max((ts for _, _, ts in partition.log.log.segment_infos()), default=-1)
    found = partition.offset_for_timestamp(largest) if largest >= 0 else None
    end = partition.last_stable_offset if read_committed else partition.high_watermark
    if found is None or found[0] >= end:
        return answer(index, epoch=partition.leader_epoch)
    offset, ts = found
    return answer(index, offset=offset, timestamp=ts, epoch=partition.leader_epoch)


def answer(
    index: int, code: ErrorCode = ErrorCode.NONE, *, offset: int = -1, timestamp: int = -1,
    epoch: int = -1,
) -> dict[str, Any]:
    return {"partition_index": index, "error_code": int(code), "timestamp": timestamp,
            "offset": offset, "leader_epoch": epoch, "old_style_offsets": []}
