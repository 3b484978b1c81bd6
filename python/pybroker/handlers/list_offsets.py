"""ListOffsets (2): earliest, latest, or the first offset at/after a timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.broker import Broker
    from pybroker.server.dispatch import Request

LATEST = -1
EARLIEST = -2


@handles(2, (1, 5))
async def handle_list_offsets(broker: Broker, request: Request) -> dict[str, Any]:
    topics = []
    for topic in request.body["topics"]:
        name = topic["name"]
        partitions = [lookup(broker, name, p) for p in topic["partitions"]]
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def lookup(broker: Broker, topic: str, p: dict[str, Any]) -> dict[str, Any]:
    index = p["partition_index"]
    partition = broker.partition(topic, index)
    if partition is None:
        return answer(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    epoch = p["current_leader_epoch"]
    if epoch >= 0 and epoch != partition.leader_epoch:
        code = (ErrorCode.FENCED_LEADER_EPOCH if epoch < partition.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH)
        return answer(index, code)
    timestamp = p["timestamp"]
    if timestamp == LATEST:
        return answer(index, offset=partition.high_watermark, epoch=partition.leader_epoch)
    if timestamp == EARLIEST:
        return answer(index, offset=partition.log.log_start_offset, epoch=partition.leader_epoch)
    if timestamp < 0:
        return answer(index, ErrorCode.UNSUPPORTED_VERSION)
    found = partition.log.offset_for_timestamp(timestamp)
    if found is None:
        return answer(index)
    offset, ts = found
    return answer(index, offset=offset, timestamp=ts, epoch=partition.leader_epoch)


def answer(
    index: int, code: ErrorCode = ErrorCode.NONE, *, offset: int = -1, timestamp: int = -1,
    epoch: int = -1,
) -> dict[str, Any]:
    return {"partition_index": index, "error_code": int(code), "timestamp": timestamp,
            "offset": offset, "leader_epoch": epoch, "old_style_offsets": []}
