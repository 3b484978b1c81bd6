"""Produce (0): validate and append each partition's record batches.

Batches go to the Rust log as the memoryview the request was decoded into: the
records are never copied or decoded in Python. acks=0 answers nothing."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pybroker import _core
from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.broker import Broker
    from pybroker.server.dispatch import Request

log = logging.getLogger(__name__)

#: Rust log errors -> the code the client gets for that partition
APPEND_ERRORS: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (_core.CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (_core.InvalidRecordError, ErrorCode.INVALID_RECORD),
    (_core.RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (_core.OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (_core.InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (_core.StorageError, ErrorCode.KAFKA_STORAGE_ERROR),
)

FIRST_SUPPORTED_VERSION = 3  # v0-2 carry message formats 0/1, which this broker does not store


@handles(0, (0, 8))
async def handle_produce(broker: Broker, request: Request) -> dict[str, Any] | None:
    body = request.body
    acks = body["acks"]
    responses = []
    for topic in body["topic_data"]:
        name = topic["name"]
        partitions = [
            {"index": p["index"], **append_partition(broker, request.version, acks, name, p)}
            for p in topic["partition_data"]
        ]
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


def append_partition(
    broker: Broker, version: int, acks: int, topic: str, data: dict[str, Any]
) -> dict[str, Any]:
    if version < FIRST_SUPPORTED_VERSION:
        return failed(ErrorCode.UNSUPPORTED_VERSION)
    if acks not in (-1, 0, 1):
        return failed(ErrorCode.INVALID_REQUIRED_ACKS)
    partition = broker.partition(topic, data["index"])
    if partition is None:
        return failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    records = data["records"]
    if records is None or len(records) == 0:
        return failed(ErrorCode.CORRUPT_MESSAGE, "empty record set")
    if len(records) > partition.segment_bytes:
        return failed(ErrorCode.RECORD_LIST_TOO_LARGE)
    if acks == -1 and partition.min_insync_replicas > 1 and len(
            broker.topic(topic).partitions[data["index"]].isr  # type: ignore[union-attr]
    ) < partition.min_insync_replicas:
        return failed(ErrorCode.NOT_ENOUGH_REPLICAS)
    try:
        result = partition.append(records)
    except Exception as exc:
        for kind, code in APPEND_ERRORS:
            if isinstance(exc, kind):
                return failed(code, str(exc))
        log.exception("append to %s-%d failed", topic, data["index"])
        return failed(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
    broker.metrics.record_produce(topic, len(records), result.record_count)
    return {
        "error_code": 0,
        "base_offset": result.base_offset,
        "log_append_time_ms": result.log_append_time_ms,
        "log_start_offset": partition.log.log_start_offset,
        "record_errors": [],
        "error_message": None,
    }


def failed(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": int(code),
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }
