"""Retention: which old segments go, and the loop that deletes them.

Kafka's rules (`UnifiedLog.deleteOldSegments`), for topics whose
`cleanup.policy` contains `delete`, every `log.retention.check.interval.ms`:

* by time: a segment goes when `now - largest timestamp in it > retention.ms`
  (the largest timestamp is the segment's max batch timestamp, or the `.log`
  file's mtime when no batch carries one); `retention.ms < 0` keeps forever;
* by size: oldest segments go while `size - segment size >= retention.bytes`
  (`retention.bytes < 0` is unlimited);
* deletion stops at the first segment that is kept, never passes the high
  watermark and never takes an empty active segment. When every segment is
  deletable the log rolls first, so the active segment is never deleted.

The log start offset moves to the base offset of the first kept segment;
fetches below it get OFFSET_OUT_OF_RANGE. The files are deleted by
`PartitionLog.advance_log_start_offset`: renamed to `*.deleted`, then removed
at once (recovery removes leftovers after a crash). `file.delete.delay.ms` is
accepted but not waited for: open file handles keep any fetch in flight valid,
which is what Kafka's delay protects."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence

import anyio

from pybroker.log.partition import Partition

log = logging.getLogger(__name__)

#: log starts moved by retention so far (on its worker thread): what caches a log start
#: without being told of each move (a follower session's idle partitions, fetch/idle.py)
#: compares it
starts_moved = 0

#: (base offset, size in bytes, largest timestamp or -1), oldest first
SegmentInfo = tuple[int, int, int]


def deletable_count(
    segments: Sequence[SegmentInfo],
    log_end_offset: int,
    high_watermark: int,
    *,
    retention_ms: int,
    retention_bytes: int,
    now_ms: int,
    mtime_ms: Callable[[int], int] = lambda base: -1,
) -> tuple[int, str]:
    """How many of the oldest segments retention deletes, and why ("" if none).

    `mtime_ms(base)` stands in for the largest timestamp of a segment without
    one (Kafka: the file's last-modified time)."""

    def upper(i: int) -> int:
        return segments[i + 1][0] if i + 1 < len(segments) else log_end_offset

    def deletable(i: int) -> bool:
        last = i + 1 == len(segments)
        return upper(i) <= high_watermark and not (last and segments[i][1] == 0)

    count = 0
    reason = ""
    if retention_ms >= 0:
        while count < len(segments) and deletable(count):
            largest = segments[count][2]
            if largest <= 0:
                largest = mtime_ms(segments[count][0])
            if now_ms - largest <= retention_ms:
                break
            count += 1
        if count:
            reason = f"retention time {retention_ms}ms breach"
    if retention_bytes >= 0:
        excess = sum(s[1] for s in segments[count:]) - retention_bytes
        by_size = 0
        while count < len(segments) and deletable(count) and excess - segments[count][1] >= 0:
            excess -= segments[count][1]
            count += 1
            by_size += 1
        if by_size:
            reason = f"{reason} and " if reason else ""
            reason += f"retention size in bytes {retention_bytes} breach"
    return count, reason


def apply_retention(partition: Partition, now_ms: int | None = None) -> int:
    """Delete the segments retention allows; returns how many went."""
    config = partition.config
    if "delete" not in config["cleanup.policy"]:
        return 0
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    plog = partition.log
    segments = plog.segment_infos()

    def mtime_ms(base: int) -> int:
        try:
            return int(os.stat(partition.directory / f"{base:020d}.log").st_mtime * 1000)
        except OSError:
            return now_ms

    count, reason = deletable_count(
        segments, plog.log_end_offset, partition.high_watermark,
        retention_ms=int(config["retention.ms"]), retention_bytes=int(config["retention.bytes"]),
        now_ms=now_ms, mtime_ms=mtime_ms)
    if count == 0:
        return 0
    if count == len(segments):
        plog.roll()  # never delete the active segment: make a new one first
        new_start = plog.log_end_offset
    else:
        new_start = segments[count][0]
    log.info("%s-%d: deleting %d segment(s) from base offset %d due to %s; log start offset "
             "%d -> %d", partition.topic, partition.index, count, segments[0][0], reason,
             plog.log_start_offset, max(new_start, plog.log_start_offset))
    plog.advance_log_start_offset(new_start)
    global starts_moved
    starts_moved += 1
    return count


def retention_pass(partitions: Iterable[Partition]) -> int:
    """One check over the given partitions; errors on one do not stop the rest."""
    deleted = 0
    now_ms = int(time.time() * 1000)
    for partition in list(partitions):
        try:
            deleted += apply_retention(partition, now_ms)
        except Exception as exc:  # a closed (deleted topic) or failing log: skip it
            log.warning("retention of %s-%d failed: %s; tried again at the next check. If "
                        "it repeats, check its log dir (disk errors, permissions, space)",
                        partition.topic, partition.index, exc)
    return deleted


async def retention_loop(partitions: Callable[[], Iterable[Partition]], interval_ms: int,
                         lock: anyio.Lock | None = None) -> None:
    """Every interval_ms, apply retention in a worker thread (file deletion
    must not stall the event loop); `lock` keeps it apart from the cleaner."""
    lock = lock or anyio.Lock()
    while True:
        await anyio.sleep(interval_ms / 1000)
        async with lock:
            await anyio.to_thread.run_sync(retention_pass, list(partitions()))
