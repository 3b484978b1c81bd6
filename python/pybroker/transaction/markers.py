"""Transaction markers on the partitions this broker leads: the receiving side of
WriteTxnMarkers (Kafka's ReplicaManager.appendRecords with origin COORDINATOR).

`write_markers` appends one COMMIT or ABORT control batch per partition (the Rust
log checks the producer epoch and the coordinator epoch, ends the producer's
transaction, and on ABORT adds the transaction to the segment's `.txnindex`),
then waits as an acks=all produce does until the ISR has every marker. The
transaction coordinator calls it for partitions led here; the WriteTxnMarkers
handler calls it for markers sent by another broker's coordinator.

Listeners (`add_marker_listener`) hear of every marker that was written and
replicated on this broker as leader (NONE answered), after the ISR has it: the
group coordinator completes or drops the transactional offset commits of
__consumer_offsets with them. The list is process-wide (one broker per process)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pybroker import _core
from pybroker.errors import BUG_REPORT, ErrorCode, KafkaError

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.replica.partition import ReplicaPartition

log = logging.getLogger(__name__)

#: fn(topic, partition, producer_id, producer_epoch, commit, marker_offset)
MarkerListener = Callable[[str, int, int, int, bool, int], None]

#: how long a marker waits for the ISR (Kafka uses the broker's request.timeout.ms,
#: 30 s by default); on timeout the partition answers REQUEST_TIMED_OUT and the
#: coordinator retries
MARKER_TIMEOUT_S = 30.0

#: Rust log errors -> the code the coordinator gets for that partition
MARKER_ERRORS: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (_core.InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (_core.TransactionCoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (_core.StorageError, ErrorCode.KAFKA_STORAGE_ERROR),
)

_listeners: list[MarkerListener] = []


def add_marker_listener(fn: MarkerListener) -> None:
    """Call fn for every marker written (and replicated) on this broker as leader."""
    if fn not in _listeners:
        _listeners.append(fn)


def remove_marker_listener(fn: MarkerListener) -> None:
    if fn in _listeners:
        _listeners.remove(fn)


async def write_markers(ctx: BrokerContext, *, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int, commit: bool,
                        partitions: Sequence[tuple[str, int]],
                        timeout_s: float = MARKER_TIMEOUT_S,
                        ) -> dict[tuple[str, int], ErrorCode]:
    """Append the COMMIT (commit=True) or ABORT marker of (producer_id,
    producer_epoch) to each partition led here and wait until the ISR has it.
    Returns each partition's error: NONE, NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
    TRANSACTION_COORDINATOR_FENCED (a newer coordinator already wrote a marker
    for this producer), NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,
    KAFKA_STORAGE_ERROR."""
    results: dict[tuple[str, int], ErrorCode] = {}
    # (partition, offset past the marker, the marker's offset)
    waiting: dict[tuple[str, int], tuple[ReplicaPartition, int, int]] = {}
    for key in partitions:
        if key in results or key in waiting:
            continue
        topic, index = key
        try:
            partition = ctx.replicas.leader_for(topic, index)
            result = partition.append_marker_as_leader(
                producer_id=producer_id, producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch, commit=commit)
        except KafkaError as exc:
            results[key] = exc.code
            continue
        except Exception as exc:
            results[key] = _error_code(exc, topic, index)
            continue
        waiting[key] = (partition, result.last_offset + 1, result.base_offset)
    if waiting:
        def settled() -> bool:
            return all(p.acks_all_status(end) is not None for p, end, _ in waiting.values())

        await ctx.purgatory.wait_until("produce", {p.hw_key for p, _, _ in waiting.values()},
                                       settled, time.monotonic() + timeout_s)
    for key, (partition, end, offset) in waiting.items():
        status = partition.acks_all_status(end)
        results[key] = ErrorCode.REQUEST_TIMED_OUT if status is None else status
        if results[key] == ErrorCode.NONE:
            _tell_listeners(key[0], key[1], producer_id, producer_epoch, commit, offset)
    return results


def _error_code(exc: Exception, topic: str, index: int) -> ErrorCode:
    for kind, code in MARKER_ERRORS:
        if isinstance(exc, kind):
            return code
    log.exception("writing a transaction marker to %s-%d failed: answered "
                  "UNKNOWN_SERVER_ERROR, the coordinator sends it again. " + BUG_REPORT,
                  topic, index, exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _tell_listeners(topic: str, index: int, producer_id: int, producer_epoch: int,
                    commit: bool, offset: int) -> None:
    for fn in list(_listeners):
        try:
            fn(topic, index, producer_id, producer_epoch, commit, offset)
        except Exception:
            # one listener's bug must not fail the marker or the others
            log.exception("transaction marker listener %r failed (the marker is written). "
                          + BUG_REPORT, fn)
