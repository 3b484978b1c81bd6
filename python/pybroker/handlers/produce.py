"""Produce (0): validate and append each partition's record batches.

Batches go to the Rust log as the memoryview the request was decoded into: the
records are never copied or decoded in Python. acks=0 answers nothing; acks=all
answers once the ISR has the records (see wait_for_isr)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any

from pybroker import _core
from pybroker.admin.internal_topics import ADMIN_CLIENT_ID, INTERNAL_TOPICS
from pybroker.errors import BUG_REPORT, ErrorCode, KafkaError
from pybroker.handlers.leader_hint import LeaderHints
from pybroker.handlers.registry import handles
from pybroker.server.deferred import DeferredResponse

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.replica.partition import ReplicaPartition
    from pybroker.server.connection import Connection
    from pybroker.server.dispatch import Request

log = logging.getLogger(__name__)

#: Rust log errors -> the code the client gets for that partition
APPEND_ERRORS: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (_core.CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (_core.InvalidRecordError, ErrorCode.INVALID_RECORD),
    (_core.InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
    (_core.UnsupportedCompressionTypeError, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (_core.RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (_core.OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (_core.InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (_core.InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
    (_core.StorageError, ErrorCode.KAFKA_STORAGE_ERROR),
)



# Kafka 4.0 refuses v0-2 (KIP-896: message formats 0/1) by closing the connection, but
# lists Produce from v0 in ApiVersions: librdkafka before 2.10 turns compression off
# when the broker's Produce range does not start at 0 (KAFKA-18659,
# ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION)
@handles(0, (3, 10), advertise_from=0)
async def handle_produce(ctx: BrokerContext, request: Request) -> dict[str, Any] | None:
    body = request.body
    acks = body["acks"]
    # the request's timeout_ms bounds a wait for a takeover and one for the ISR together
    deadline = request.received_ms + max(0, body["timeout_ms"]) / 1000
    if ctx.replicas.taking_over:
        # partitions this broker is taking the lead of: their batches wait for it, in
        # this connection's order, rather than being refused (see until_taken_over)
        await ctx.replicas.until_taken_over(
            ((t["name"], p["index"]) for t in body["topic_data"] for p in t["partition_data"]),
            deadline - time.monotonic())
    responses = []
    # acks=all appends that wait for the ISR: (partition, offset to reach, its answer)
    waiting: list[tuple[ReplicaPartition, int, dict[str, Any]]] = []
    # the internal topics hold group offsets and transaction state (producer epochs):
    # only their coordinators write them, and Kafka's admin tools (its client id)
    internal_allowed = request.header.client_id == ADMIN_CLIENT_ID
    for topic in body["topic_data"]:
        name = topic["name"]
        partitions = []
        for p in topic["partition_data"]:
            if name in INTERNAL_TOPICS and not internal_allowed:
                partitions.append({"index": p["index"], **failed(
                    ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {name}")})
                continue
            answer, appended = append_partition(ctx, request.version, acks, name, p)
            answer = {"index": p["index"], **answer}
            if appended is not None and acks == -1:
                waiting.append((appended[0], appended[1], answer))
            partitions.append(answer)
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        return None
    connection, version = request.connection, request.version
    if waiting and not isr_settled(waiting):
        # about to wait for the followers: the answers held back to go out together
        # (earlier produce requests of this connection) go now, as before a fetch's
        # long poll; held until the connection is idle, each would wait for this
        # request's replication too
        await connection.flush()
        if request.may_defer:
            # the records are appended: the connection reads on (the client's next
            # produce requests join this replication round) and the answer follows
            # once the ISR has them, in request order (pybroker.server.deferred)
            def answer_later() -> dict[str, Any]:
                isr_answers(waiting)
                return produce_answer(ctx, connection, version, responses)

            return DeferredResponse(ctx.purgatory, isr_keys(waiting),
                                    functools.partial(isr_settled, waiting), answer_later,
                                    deadline)
        await wait_for_isr(ctx, waiting, deadline)
    return produce_answer(ctx, connection, version, responses)


def produce_answer(ctx: BrokerContext, connection: Connection, version: int,
                   responses: list[dict[str, Any]]) -> dict[str, Any]:
    answer: dict[str, Any] = {"responses": responses, "throttle_time_ms": 0}
    if version >= 10:
        # KIP-951: NOT_LEADER_OR_FOLLOWER names the current leader (Kafka's KafkaApis)
        hints = LeaderHints(ctx.metadata, connection)
        for topic in responses:
            for p in topic["partition_responses"]:
                if p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    p["current_leader"] = hints.current_leader(topic["name"], p["index"])
        answer["node_endpoints"] = hints.node_endpoints()
    return answer


async def wait_for_isr(ctx: BrokerContext,
                       waiting: list[tuple[ReplicaPartition, int, dict[str, Any]]],
                       deadline: float) -> None:
    """acks=all: answer once every partition's high watermark passed the appended
    records (the whole ISR has them), or with REQUEST_TIMED_OUT at the request's
    timeout_ms, as Kafka's DelayedProduce does."""
    await ctx.purgatory.wait_until("produce", isr_keys(waiting),
                                   functools.partial(isr_settled, waiting), deadline)
    isr_answers(waiting)


def isr_keys(waiting: list[tuple[ReplicaPartition, int, dict[str, Any]]]) -> list[Hashable]:
    """The purgatory keys an acks=all answer waits on: its partitions' high watermarks."""
    if len(waiting) == 1:
        return [waiting[0][0].hw_key]
    return list({p.hw_key: None for p, _, _ in waiting})


def isr_settled(waiting: list[tuple[ReplicaPartition, int, dict[str, Any]]]) -> bool:
    """Every partition of an acks=all answer has its outcome (see acks_all_status)."""
    for partition, offset, _ in waiting:
        if partition.acks_all_status(offset) is None:
            return False
    return True


def isr_answers(waiting: list[tuple[ReplicaPartition, int, dict[str, Any]]]) -> None:
    """Each partition's outcome into its answer; still waiting means timed out."""
    for partition, offset, answer in waiting:
        status = partition.acks_all_status(offset)
        if status is None:
            status = ErrorCode.REQUEST_TIMED_OUT
        if status != ErrorCode.NONE:
            answer.update(failed(status))


def append_partition(
    ctx: BrokerContext, version: int, acks: int, topic: str, data: dict[str, Any]
) -> tuple[dict[str, Any], tuple[ReplicaPartition, int] | None]:
    """Append one partition's batches: (its answer, (partition, offset past the
    appended records) when something was appended)."""
    if acks not in (-1, 0, 1):
        return failed(ErrorCode.INVALID_REQUIRED_ACKS), None
    try:
        partition = ctx.replicas.leader_for(topic, data["index"])
    except KafkaError as exc:
        return failed(exc.code), None
    records = data["records"]
    if records is None or len(records) == 0:
        return failed(ErrorCode.CORRUPT_MESSAGE, "empty record set"), None
    if len(records) > partition.log.segment_bytes:
        return failed(ErrorCode.RECORD_LIST_TOO_LARGE), None
    try:
        result = partition.append_as_leader(records, acks)
    except KafkaError as exc:
        return failed(exc.code, exc.message), None
    except Exception as exc:
        for kind, code in APPEND_ERRORS:
            if isinstance(exc, kind):
                return failed(code, str(exc), getattr(exc, "record_errors", ())), None
        log.exception("append to %s-%d failed: answered UNKNOWN_SERVER_ERROR, nothing was "
                      "written. " + BUG_REPORT, topic, data["index"])
        return failed(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)), None
    ctx.metrics.record_produce(topic, len(records), result.record_count)
    answer = {
        "error_code": 0,
        "base_offset": result.base_offset,
        "log_append_time_ms": result.log_append_time_ms,
        "log_start_offset": partition.log_start_offset,
        "record_errors": [],
        "error_message": None,
    }
    return answer, (partition, result.last_offset + 1)


def failed(code: ErrorCode, message: str | None = None,
           record_errors: Iterable[tuple[int, str]] = ()) -> dict[str, Any]:
    """A partition's refusal; `record_errors` are the (batch index, message) of the
    records the log refused (KIP-467: the whole batch fails, these are named)."""
    return {
        "error_code": int(code),
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [{"batch_index": index, "batch_index_error_message": text}
                          for index, text in record_errors],
        "error_message": message,
    }
