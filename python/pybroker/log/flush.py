"""Flush policy: when partition logs are fsynced (Kafka's defaults leave it to
the OS: replication, not fsync, is what makes data durable).

* `flush.messages` (`log.flush.interval.messages`): after an append leaves at
  least this many messages above the recovery point, the log is flushed right
  away (`Partition.append`, as Kafka's `UnifiedLog.append`).
* `flush.ms` (`log.flush.interval.ms`, default `log.flush.scheduler.interval.ms`):
  every `log.flush.scheduler.interval.ms` the flusher fsyncs each log not
  flushed for at least `flush.ms` that has unflushed data (Kafka's
  `LogManager.flushDirtyLogs`). The default interval (Long.MAX) never runs it.

A flush fsyncs the `.log` and both indexes of every segment from the recovery
point on and moves the recovery point to the log end offset; the broker writes
it to `recovery-point-offset-checkpoint` every
`log.flush.offset.checkpoint.interval.ms`, and recovery after a crash starts
there. Each flush bumps `Partition.flushes` (summed by `LogManager.flushes`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import anyio

from pybroker.config import LONG_MAX
from pybroker.log.partition import Partition

log = logging.getLogger(__name__)


def due_for_flush(partition: Partition, now_ms: int) -> bool:
    plog = partition.log
    if plog.log_end_offset <= plog.recovery_point:
        return False
    return now_ms - partition.last_flush_ms >= int(partition.config["flush.ms"])


def flush_pass(partitions: Iterable[Partition]) -> int:
    """Flush the logs whose flush.ms elapsed; returns how many were flushed."""
    now_ms = int(time.time() * 1000)
    flushed = 0
    for partition in list(partitions):
        if partition.offline or not due_for_flush(partition, now_ms):
            continue
        try:
            partition.flush()
            flushed += 1
        except Exception as exc:  # closed (deleted topic), or an I/O error that took
            # the dir offline (logged as such): the other logs are still flushed
            log.debug("flush of %s-%d failed: %s", partition.topic, partition.index, exc)
    return flushed


async def flush_loop(partitions: Callable[[], Iterable[Partition]], interval_ms: int) -> None:
    """Every interval_ms, flush due logs in a worker thread (fsync blocks)."""
    if interval_ms >= LONG_MAX // 2:
        return  # Kafka's default: the scheduler never fires
    while True:
        await anyio.sleep(interval_ms / 1000)
        await anyio.to_thread.run_sync(flush_pass, list(partitions()))
