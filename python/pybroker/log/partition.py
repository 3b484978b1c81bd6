"""One partition's local log on this broker: the Rust log, its topic config, its
flush state and its high watermark.

The high watermark is kept here, beside the log it bounds (as Kafka's
UnifiedLog does), but it is moved only by the replica layer
(`pybroker.replica.partition`), which knows the ISR and the followers' log end
offsets; reads for consumers stop at it."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from pybroker._core import AppendResult, FileSlice, PartitionLog, StorageError
from pybroker.config import TopicConfig
from pybroker.log.dir_failure import LogDirFailures

log = logging.getLogger(__name__)


def log_options(config: TopicConfig) -> dict[str, object]:
    """PartitionLog keyword arguments from a topic's effective config."""
    return {
        "segment_bytes": int(config["segment.bytes"]),
        "segment_ms": int(config["segment.ms"]),
        "index_interval_bytes": int(config["index.interval.bytes"]),
        "segment_index_bytes": int(config["segment.index.bytes"]),
        "max_message_bytes": int(config["max.message.bytes"]),
        "log_append_time": config["message.timestamp.type"] == "LogAppendTime",
        "timestamp_before_max_ms": int(config["message.timestamp.before.max.ms"]),
        "timestamp_after_max_ms": int(config["message.timestamp.after.max.ms"]),
        "compact": "compact" in config["cleanup.policy"],
    }


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        directory: Path,
        config: TopicConfig,
        *,
        recovery_point: int,
        log_start_offset: int,
        clean_shutdown: bool,
        high_watermark: int = 0,
        failures: LogDirFailures | None = None,
        options: dict[str, object] | None = None,
        opened: PartitionLog | None = None,
    ) -> None:
        """`options`: log_options(config), when the caller has them already (one
        topic's partitions share them). `opened`: the log, when the caller opened it
        already with these offsets and options (a batch of logs opened in one call,
        see LogManager.open_partitions_async)."""
        self.topic = topic
        self.index = index
        self.directory = directory
        self._use_config(config)
        self.log = opened if opened is not None else PartitionLog(
            str(directory),
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
            **(log_options(config) if options is None else options),  # type: ignore[arg-type]
        )
        # the replication-offset-checkpoint value, within what the log holds
        self.high_watermark = min(max(high_watermark, self.log.log_start_offset),
                                  self.log.log_end_offset)
        #: fsyncs of this log (flush policy, see log/flush.py) and when the last one was
        self.flushes = 0
        self.last_flush_ms = int(time.time() * 1000)
        self._failures = failures
        self.closed = False
        #: a roll's flush job is on a worker thread (see maybe_flush)
        self._roll_flush_running = False

    def update_high_watermark(self, offset: int) -> None:
        self.high_watermark = min(max(offset, self.log.log_start_offset), self.log.log_end_offset)
        # ended transactions whose markers are now below it need no remembering
        self.log.last_stable_offset(self.high_watermark)

    def append(self, records: memoryview, leader_epoch: int) -> AppendResult:
        """Append as leader: offsets assigned here, batches stamped with leader_epoch."""
        result = self.log.append(records, leader_epoch, int(time.time() * 1000))
        self.maybe_flush()
        return result

    def append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      commit: bool, leader_epoch: int) -> AppendResult:
        """Append a COMMIT/ABORT control batch ending the producer's transaction."""
        result = self.log.append_end_txn_marker(producer_id, producer_epoch, coordinator_epoch,
                                                commit, leader_epoch,
                                                int(time.time() * 1000))
        self.maybe_flush()
        return result

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the high watermark, or below it the first offset of a
        transaction still open or whose marker is not below the high watermark."""
        return self.log.last_stable_offset(self.high_watermark)

    def append_as_follower(self, records: memoryview) -> AppendResult:
        """Append the leader's batches as they are (its offsets, epochs, bytes)."""
        result = self.log.append_as_follower(records)
        self.maybe_flush()
        return result

    def maybe_flush(self) -> None:
        """flush.messages: fsync once that many messages are past the recovery point.
        After a roll, the producer snapshot it wrote is fsynced off the event loop."""
        if self.log.log_end_offset - self.log.recovery_point >= self.flush_messages:
            self.flush()
        elif self.log.roll_flush_pending and not self._roll_flush_running:
            self._start_roll_flush()

    def _start_roll_flush(self) -> None:
        """Run the roll's fsyncs (its producer snapshot, the dir) on a worker thread:
        on the event loop they stalled every request for the length of an fsync at
        each roll (issue 26; Kafka moved them off its request threads too,
        KAFKA-15046)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop to keep free (a tool, a test): here
            self.flush_rolled()
            return
        self._roll_flush_running = True
        loop.run_in_executor(None, self.flush_rolled).add_done_callback(self._roll_flush_done)

    def _roll_flush_done(self, _future: object) -> None:
        self._roll_flush_running = False

    def flush_rolled(self) -> None:
        """fsync what the rolls so far left. A failed fsync takes the log dir offline,
        as a failed flush does."""
        try:
            self.log.flush_rolled()
        except StorageError as exc:
            if not self.closed and self._failures is not None:
                self._failures.fail(self.directory.parent,
                                    f"fsync after a roll of {self.topic}-{self.index}",
                                    exc)
            else:
                log.debug("fsync after a roll of %s-%d failed: %s", self.topic, self.index,
                          exc)
        except Exception as exc:  # the log was closed meanwhile (topic deleted)
            if not self.closed:
                log.exception("fsync after a roll of %s-%d failed", self.topic, self.index)
            else:
                log.debug("fsync after a roll of %s-%d: %s", self.topic, self.index, exc)

    @property
    def offline(self) -> bool:
        """Its log dir was taken offline by an I/O error (see dir_failure.py)."""
        # asked for every produced and fetched partition: with no dir offline (nearly
        # always) no path is built and hashed (a tenth of a leader's handle_fetch)
        failures = self._failures
        return failures is not None and bool(failures.offline) \
            and failures.is_offline(self.directory.parent)

    def flush(self) -> None:
        """fsync the log up to its end; the recovery point moves there. A failed fsync
        takes the log dir offline: what reached the disk before it cannot be told."""
        try:
            self.log.flush()
        except StorageError as exc:
            if not self.closed and self._failures is not None:
                self._failures.fail(self.directory.parent,
                                    f"fsync of {self.topic}-{self.index}", exc)
            raise
        self.flushes += 1
        self.last_flush_ms = int(time.time() * 1000)
        log.debug("flushed %s-%d up to offset %d (flush #%d)", self.topic, self.index,
                  self.log.recovery_point, self.flushes)

    def set_config(self, config: TopicConfig) -> None:
        """Apply a changed topic config: retention/flush read it on their next
        check; segment and size settings go to the Rust log for the next append."""
        self._use_config(config)
        self.log.set_config(**log_options(config))  # type: ignore[arg-type]

    def _use_config(self, config: TopicConfig) -> None:
        self.config = config
        # read on every produce: resolved once here rather than per request
        self.segment_bytes = int(config["segment.bytes"])
        self.flush_messages = int(config["flush.messages"])
        self.min_insync_replicas = int(config["min.insync.replicas"])

    def read(self, offset: int, max_bytes: int, min_one: bool) -> FileSlice | None:
        return self.log.read(offset, max_bytes, min_one=min_one, max_offset=self.high_watermark)

    def close(self) -> None:
        self.closed = True
        self.log.close()

    def abandon(self) -> None:
        """Stop using a log whose topic is deleted, without flushing it or writing its
        producer snapshot (close() would, by path, into a dir about to go). The Rust
        log refuses every later call: a produce or fetch still holding this partition
        would otherwise reopen an evicted segment file by path, which after the topic
        is created again is the new topic's file."""
        self.closed = True
        self.log.abandon()
