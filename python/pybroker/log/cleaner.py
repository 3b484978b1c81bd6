"""Compaction scheduling (Kafka's LogCleanerManager); the cleaning itself is
`PartitionLog.clean` in Rust (`rust/log/src/cleaner.rs`).

For topics whose `cleanup.policy` contains `compact` (and `log.cleaner.enable`):

* each log has a first dirty offset, kept per log dir in
  `cleaner-offset-checkpoint` (Kafka's checkpoint format, `log/checkpoint.py`);
  a missing entry, or one outside [log start, log end], starts at the log start;
* its dirty ratio is `dirty bytes / (clean bytes + dirty bytes)` over the
  non-active segments (clean: segments wholly below the first dirty offset;
  dirty: the rest, minus segments newer than `min.compaction.lag.ms`);
* the filthiest log with a ratio above `min.cleanable.dirty.ratio` is cleaned in
  a worker thread (the event loop keeps serving; appends continue, the Rust
  side holds its lock only to plan and to swap) with `delete.retention.ms`,
  `min.compaction.lag.ms`, `log.cleaner.io.max.bytes.per.second` and
  `log.cleaner.dedupe.buffer.size`; the checkpoint is then written;
* with nothing to clean the cleaner sleeps `log.cleaner.backoff.ms`."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import anyio

from pybroker.config import BrokerConfig
from pybroker.log.checkpoint import read_checkpoint_or_reset, write_checkpoint
from pybroker.log.partition import Partition

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
#: `log.cleaner.io.max.bytes.per.second` at or above this is "unthrottled" (Kafka: Double.MAX)
UNTHROTTLED = 1e300

Key = tuple[str, int]


def is_compacted(partition: Partition) -> bool:
    return "compact" in partition.config["cleanup.policy"]


def dirty_ratio(partition: Partition, first_dirty: int, now_ms: int) -> float:
    """Kafka's cleanable ratio from segment sizes: 0 when nothing is cleanable."""
    segments = partition.log.segment_infos()
    lag_ms = int(partition.config["min.compaction.lag.ms"])
    clean = dirty = 0
    for i, (_base, size, max_ts) in enumerate(segments[:-1]):  # never the active segment
        if segments[i + 1][0] <= first_dirty:
            clean += size
        elif lag_ms > 0 and max_ts > now_ms - lag_ms:
            break  # this one and every later segment are not cleanable yet
        else:
            dirty += size
    total = clean + dirty
    return dirty / total if total else 0.0


class Cleaner:
    """Picks the filthiest compacted log, cleans it, keeps the checkpoints."""

    def __init__(self, config: BrokerConfig, dirs: Iterable[Path]) -> None:
        self.config = config
        self.dirs = list(dirs)
        self.checkpoints: dict[Path, dict[Key, int]] = {
            d: read_checkpoint_or_reset(d / CLEANER_CHECKPOINT_FILE,
                                        "compacted logs are cleaned from their start")
            for d in self.dirs}
        #: cleans done since start (tests, metrics)
        self.cleans = 0

    def first_dirty(self, partition: Partition) -> int:
        key = (partition.topic, partition.index)
        offset = self.checkpoints.get(partition.directory.parent, {}).get(key)
        plog = partition.log
        if offset is None or not plog.log_start_offset <= offset <= plog.log_end_offset:
            return plog.log_start_offset
        return offset

    def filthiest(self, partitions: Iterable[Partition]) -> tuple[Partition, int] | None:
        now_ms = int(time.time() * 1000)
        best: tuple[float, Partition, int] | None = None
        for p in partitions:
            if not is_compacted(p) or p.log.segment_count < 2:
                continue
            first_dirty = self.first_dirty(p)
            ratio = dirty_ratio(p, first_dirty, now_ms)
            if ratio > float(p.config["min.cleanable.dirty.ratio"]) and (
                    best is None or ratio > best[0]):
                best = (ratio, p, first_dirty)
        return None if best is None else (best[1], best[2])

    def clean(self, partition: Partition, first_dirty: int) -> int:
        """One clean (blocking: run it in a worker thread); returns the new
        first dirty offset."""
        config = partition.config
        throttle = float(self.config["log.cleaner.io.max.bytes.per.second"])
        stats = partition.log.clean(
            first_dirty,
            delete_retention_ms=int(config["delete.retention.ms"]),
            min_compaction_lag_ms=int(config["min.compaction.lag.ms"]),
            max_bytes_per_second=0.0 if throttle >= UNTHROTTLED else throttle,
            offset_map_bytes=int(self.config["log.cleaner.dedupe.buffer.size"]),
        )
        self.cleans += 1
        key = (partition.topic, partition.index)
        self.checkpoints.setdefault(partition.directory.parent, {})[key] = \
            stats.first_dirty_offset
        log.info("cleaned %s-%d from offset %d to %d: %d bytes read, %d written, %d records "
                 "removed, %d segments", partition.topic, partition.index, first_dirty,
                 stats.first_dirty_offset, stats.bytes_read, stats.bytes_written,
                 stats.records_removed, stats.segments_cleaned)
        return int(stats.first_dirty_offset)

    def write_checkpoints(self, partitions: Iterable[Partition]) -> None:
        """Each dir's checkpoint, with entries only for logs that still exist."""
        live = {(p.topic, p.index) for p in partitions}
        for directory in self.dirs:
            entries = {k: v for k, v in self.checkpoints.get(directory, {}).items() if k in live}
            self.checkpoints[directory] = entries
            write_checkpoint(directory / CLEANER_CHECKPOINT_FILE, entries)

    async def run(self, partitions: Callable[[], Iterable[Partition]],
                  lock: anyio.Lock) -> None:
        """Clean while there is something to clean, else back off."""
        if not self.config["log.cleaner.enable"]:
            return
        backoff = int(self.config["log.cleaner.backoff.ms"]) / 1000
        while True:
            found = self.filthiest(partitions())
            if found is None:
                await anyio.sleep(backoff)
                continue
            partition, first_dirty = found
            try:
                async with lock:
                    new_dirty = await anyio.to_thread.run_sync(
                        functools.partial(self.clean, partition, first_dirty))
                    self.write_checkpoints(partitions())
            except Exception as exc:  # closed under us (topic deleted) or an I/O error
                log.warning("cleaning %s-%d failed: %s; tried again at a later pass. If it "
                            "repeats, check its log dir (disk errors, permissions, space)",
                            partition.topic, partition.index, exc)
                new_dirty = first_dirty
            # no progress (nothing cleanable after all): do not spin on this log
            await anyio.sleep(backoff if new_dirty <= first_dirty else 0)
