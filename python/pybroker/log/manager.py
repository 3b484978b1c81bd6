"""Opens, creates and deletes partition logs across `log.dirs`, and writes the
broker-level files Kafka keeps beside them (meta.properties, checkpoints, the
clean-shutdown marker)."""

from __future__ import annotations

import base64
import collections
import logging
import os
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import anyio

from pybroker.config import (
    BrokerConfig,
    ConfigError,
    TopicConfig,
    parse_topic_config,
    read_properties,
)
from pybroker.coordination.base import TopicRecord
from pybroker.log.checkpoint import (
    MalformedCheckpoint,
    read_checkpoint,
    read_checkpoint_or_reset,
    write_checkpoint,
)
from pybroker.log.cleaner import Cleaner
from pybroker.log.dir_failure import LogDirFailures
from pybroker._core import StorageError, assign_leader_epochs, open_logs, read_small_files
from pybroker.log.partition import Partition, log_options
from pybroker.phase_log import Tally

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
REPLICATION_FILE = "replication-offset-checkpoint"
META_FILE = "meta.properties"


def topic_config(broker: BrokerConfig, record: TopicRecord) -> TopicConfig:
    return TopicConfig(broker, {k: parse_topic_config(k, v) for k, v in record.configs.items()})


def partition_dir_name(topic: str, index: int) -> str:
    return f"{topic}-{index}"


def write_checkpoint_files(files: list[tuple[Path, dict[tuple[str, int], int]]],
                           failures: LogDirFailures) -> None:
    """Write each file; one that cannot be written takes its dir offline (the other
    dirs' files are still written)."""
    for path, offsets in files:
        if failures.is_offline(path.parent):
            continue
        try:
            write_checkpoint(path, offsets)
        except OSError as exc:
            failures.fail(path.parent, f"writing {path.name}", exc)


class LogManager:
    def __init__(self, config: BrokerConfig, cluster_id: str) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.dirs = [Path(d) for d in config.log_dirs]
        #: the dirs taken offline by an I/O error (see dir_failure.py)
        self.failures = LogDirFailures(self.dirs)
        self.partitions: dict[tuple[str, int], Partition] = {}
        #: open partitions per log dir, kept with `partitions` (where a new one goes,
        #: without counting every open partition on each create)
        self._dir_load: collections.Counter[Path] = collections.Counter()
        #: the topic id each open partition's partition.metadata holds
        self._topic_ids: dict[tuple[str, int], uuid.UUID] = {}
        self._clean: dict[Path, bool] = {}
        self._recovery_points: dict[Path, dict[tuple[str, int], int]] = {}
        self._log_starts: dict[Path, dict[tuple[str, int], int]] = {}
        self._high_watermarks: dict[Path, dict[tuple[str, int], int]] = {}
        #: fsyncs of logs that are gone (deleted topics), so `flushes` never goes back
        self._flushes_closed = 0
        # checkpoint writes are serialized (the periodic one on a worker thread,
        # DeleteRecords' and the shutdown's on the loop: each writes `<file>.tmp` and
        # renames it), and a snapshot older than the one on disk is not written
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_taken = 0
        self._checkpoint_written = 0
        #: the compaction scheduler, once run_schedulers started it
        self.cleaner: Cleaner | None = None
        #: the logs opened in one burst (after a start, a new topic): one INFO line
        self.open_tally = Tally(log, _opened_line)

    # --- lifecycle ---
    def startup(self) -> None:
        """Read the log dirs' checkpoints and clean-shutdown markers; partitions
        are opened afterwards, as the replica layer takes them on."""
        for directory in self.dirs:
            directory.mkdir(parents=True, exist_ok=True)
            self._check_meta(directory)
            self._write_meta(directory)
            marker = directory / CLEAN_SHUTDOWN_FILE
            self._clean[directory] = marker.exists()
            if not marker.exists() and any(p.is_dir() for p in directory.iterdir()):
                log.info("log dir %s was not shut down cleanly (no %s): its logs are "
                         "recovered from their recovery points as they open", directory,
                         CLEAN_SHUTDOWN_FILE)
            self._recovery_points[directory] = read_checkpoint_or_reset(
                directory / RECOVERY_POINT_FILE,
                "every log in the dir is recovered from its first segment")
            self._log_starts[directory] = read_checkpoint_or_reset(
                directory / LOG_START_FILE,
                "each log starts at its first segment's base offset")
            self._high_watermarks[directory] = self._read_high_watermarks(directory)
        # the marker only vouches for the shutdown before this start (the flags are
        # kept in memory for the partitions opened later)
        for directory in self.dirs:
            marker = directory / CLEAN_SHUTDOWN_FILE
            if marker.exists():
                marker.unlink()
                # durable before anything is written: a marker back after a power loss
                # would vouch for a clean shutdown, and the next recovery be skipped
                _fsync_dir(directory)

    def shutdown(self) -> None:
        """Close every log, write the checkpoints and mark each dir cleanly shut down
        (its next start skips recovery). A failed dir gets nothing written and no
        marker (Kafka's LogManager.shutdown covers the live dirs only): its logs are
        recovered at the next start. A log whose closing fsync fails takes its dir
        offline the same way, and the other logs are still closed.

        The logs close num.recovery.threads.per.data.dir at a time per data dir, as
        Kafka's LogManager.shutdown flushes and closes them: a close is a few fsyncs,
        each a round trip to the device, and one log after another took 14-25 s to
        exit with 3,000 partitions (issue 25). The Rust close runs without the GIL."""
        live = [p for p in self.partitions.values() if not p.offline]

        def close(partition: Partition) -> None:
            if partition.offline:  # its dir failed meanwhile: nothing more written there
                return
            try:
                partition.close()
            except StorageError as exc:
                self.failures.fail(partition.directory.parent,
                                   f"closing {partition.topic}-{partition.index}", exc)

        workers = self.config["num.recovery.threads.per.data.dir"] * len(
            {p.directory.parent for p in live})
        if workers <= 1 or len(live) <= 1:
            for partition in live:
                close(partition)
        else:
            with ThreadPoolExecutor(min(workers, len(live)),
                                    thread_name_prefix="log-close") as pool:
                list(pool.map(close, live))
        self.write_checkpoints()
        for directory in self.dirs:
            if not self.failures.is_offline(directory):
                (directory / CLEAN_SHUTDOWN_FILE).touch()
        self.partitions.clear()
        self._dir_load.clear()

    async def run_schedulers(self) -> None:
        """The log lifecycle loops (retention, flush, cleaner, producer expiry), until
        cancelled.
        Retention and the cleaner take turns (one lock), as Kafka pauses
        cleaning while it deletes segments of a log."""
        from pybroker.log.flush import flush_loop
        from pybroker.log.retention import retention_loop
        from pybroker.producer.expiry import expiry_loop

        def partitions() -> list[Partition]:
            return list(self.partitions.values())

        lock = anyio.Lock()
        self.cleaner = Cleaner(self.config, self.dirs)
        async with anyio.create_task_group() as tg:
            tg.start_soon(retention_loop, partitions,
                          self.config["log.retention.check.interval.ms"], lock)
            tg.start_soon(flush_loop, partitions, self.config["log.flush.scheduler.interval.ms"])
            tg.start_soon(self.cleaner.run, partitions, lock)
            tg.start_soon(expiry_loop, partitions,
                          self.config["producer.id.expiration.check.interval.ms"],
                          self.config["producer.id.expiration.ms"])

    def checkpoint_files(self) -> list[tuple[Path, dict[tuple[str, int], int]]]:
        """What the offset checkpoint files get, read at one moment (cheap)."""
        files: list[tuple[Path, dict[tuple[str, int], int]]] = []
        for directory in self.dirs:
            mine = {k: p for k, p in self.partitions.items() if p.directory.parent == directory}
            files.append((directory / RECOVERY_POINT_FILE,
                          {k: p.log.recovery_point for k, p in mine.items()}))
            files.append((directory / LOG_START_FILE,
                          {k: p.log.log_start_offset for k, p in mine.items()}))
            files.append((directory / REPLICATION_FILE,
                          {k: p.high_watermark for k, p in mine.items()}))
        return files

    def write_checkpoints(self) -> None:
        self._write_checkpoint_snapshot(*self._checkpoint_snapshot())

    async def write_checkpoints_in_thread(self) -> None:
        """write_checkpoints with the writes in a worker thread: each file is fsynced
        (3 per data dir, 4-24 ms together on the bench machine, more behind a produce
        load's writeback), which on the event loop stalled every request in flight
        (issue 18). The offsets are read here, on the loop, as before."""
        await anyio.to_thread.run_sync(self._write_checkpoint_snapshot,
                                       *self._checkpoint_snapshot())

    def _checkpoint_snapshot(self) -> tuple[int, list[tuple[Path, dict[tuple[str, int], int]]]]:
        self._checkpoint_taken += 1
        return self._checkpoint_taken, self.checkpoint_files()

    def _write_checkpoint_snapshot(
            self, taken: int, files: list[tuple[Path, dict[tuple[str, int], int]]]) -> None:
        """Write one snapshot's files unless a later snapshot is on disk already (a
        write on the loop that overtook one still waiting in its thread)."""
        with self._checkpoint_lock:
            if taken < self._checkpoint_written:
                return
            write_checkpoint_files(files, self.failures)
            self._checkpoint_written = taken

    @property
    def flushes(self) -> int:
        """fsyncs done by the flush policy since start (pybroker_log_flushes_total)."""
        return self._flushes_closed + sum(p.flushes for p in self.partitions.values())

    # --- partitions ---
    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def open_partition(self, record: TopicRecord, index: int) -> Partition:
        placed = self._place(record, index)
        if isinstance(placed, Partition):
            return placed
        return self._register(record, index, placed.directory,
                              self._open_files(record, index, placed))

    async def open_partition_async(self, record: TopicRecord, index: int,
                                   lead_epoch: int | None = None) -> Partition:
        """open_partition with the file work (the dir, partition.metadata, the log's
        files and their fsyncs; a recovery after an unclean shutdown) on a worker
        thread, so the event loop keeps serving meanwhile. What the manager keeps is
        changed on the loop only. Not cancellable midway: the log is registered (and
        closed by shutdown) once its files exist.

        `lead_epoch`: this broker is to lead the partition at that leader epoch. The
        epoch is then recorded at the log end on the thread too (its checkpoint file is
        written and fsynced, as becoming leader would do on the loop): nothing can
        append to a log not yet registered, so the log end is the one make_leader
        would record, and make_leader finds the epoch there already."""
        placed = self._place(record, index)
        if isinstance(placed, Partition):
            return placed
        opened = await anyio.to_thread.run_sync(self._open_files, record, index, placed,
                                                lead_epoch)
        return self._register(record, index, placed.directory, opened)

    async def open_partitions_async(self, record: TopicRecord, wanted: dict[int, int | None]
                                    ) -> dict[int, Partition | Exception]:
        """open_partition_async for several partitions of a topic (index -> lead epoch) in
        one worker-thread call: a 100-partition topic cost 100 thread round trips, each
        slow on a loaded machine. Each index gets its partition, or the exception its
        open raised (UnreadablePartitionMetadata, an OSError), for the caller to handle
        where it would have met it. Shielded: what was opened is registered."""
        results: dict[int, Partition | Exception] = {}
        placed: dict[int, _Placed] = {}
        for index in wanted:
            where = self._place(record, index)
            if isinstance(where, Partition):
                results[index] = where
            else:
                placed[index] = where
                # the batch spreads over the dirs as it is placed
                self._dir_load[where.directory] += 1

        # the topic's config and log options once for all its partitions (a restart
        # opens thousands of a topic's logs; each read the config's layers again)
        config = topic_config(self.config, record)
        options = log_options(config)
        # num.recovery.threads.per.data.dir opens at a time in each dir, as Kafka
        # loads logs (one log's recovery scan and fsyncs overlap the next one's)
        threads = self.config["num.recovery.threads.per.data.dir"] * len(
            {where.directory for where in placed.values()})

        def open_all() -> dict[int, _Opened | Exception]:
            return self._open_batch(record, placed, wanted, (config, options), threads)

        with anyio.CancelScope(shield=True), self.open_tally.ongoing():
            try:
                opened = await anyio.to_thread.run_sync(open_all) if placed else {}
            finally:
                for where in placed.values():
                    self._dir_load[where.directory] -= 1
            for index, where in placed.items():
                got = opened[index]
                results[index] = (got if isinstance(got, Exception)
                                  else self._register(record, index, where.directory, got))
        return results

    def _place(self, record: TopicRecord, index: int) -> Partition | _Placed:
        """The partition when it is open already, else the dir to open it in (the one
        holding its log, or for a new log the least loaded). Reading what the dir holds
        is left to _open_files, off the event loop."""
        key = (record.name, index)
        existing = self.partitions.get(key)
        if existing is not None:
            self.ensure_topic_id(record, index)
            return existing
        name = partition_dir_name(record.name, index)
        directory = next((d for d in self.dirs if (d / name).is_dir()), None)
        if directory is None:
            return _Placed(self._least_loaded_dir(), False)
        return _Placed(directory, True)

    def _open_files(self, record: TopicRecord, index: int, placed: _Placed,
                    lead_epoch: int | None = None,
                    configured: tuple[TopicConfig, dict[str, object]] | None = None
                    ) -> _Opened:
        """The file work of opening a partition (any thread). A dir holding an earlier
        topic's log (see _holds_other_topic) is deleted first and the log starts empty;
        a partition.metadata that cannot be read raises UnreadablePartitionMetadata.
        `configured`: the topic's config and log options, when the caller has them."""
        started = time.monotonic()
        path, replaced = self._prepare_dir(record, index, placed, UNREAD)
        if configured is None:
            config = topic_config(self.config, record)
            configured = (config, log_options(config))
        offsets = self._open_offsets(record.name, index, placed, replaced)
        partition = Partition(
            record.name, index, path, configured[0], options=configured[1],
            recovery_point=offsets.recovery_point, log_start_offset=offsets.log_start,
            clean_shutdown=offsets.clean, high_watermark=offsets.high_watermark,
            failures=self.failures)
        if lead_epoch is not None:
            partition.log.assign_leader_epoch(lead_epoch, partition.log.log_end_offset)
        return _Opened(partition, offsets.recovers, started, replaced)

    def _open_batch(self, record: TopicRecord, placed: dict[int, _Placed],
                    wanted: dict[int, int | None],
                    configured: tuple[TopicConfig, dict[str, object]], threads: int
                    ) -> dict[int, _Opened | Exception]:
        """_open_files for many partitions of a topic (a worker thread), each one's
        exception in its place. The partition.metadata reads, the log opens and the
        lead epochs' checkpoints are each one call for the whole batch, `threads`
        files at a time without the GIL: opened one by one from Python threads, each
        log's file calls took the GIL back several times, each wait up to the switch
        interval while the event loop held it (issue 25: after a kill -9 the opening
        threads spent as long there as in the opens themselves)."""
        started = time.monotonic()
        results: dict[int, _Opened | Exception] = {}
        paths = {index: where.directory / partition_dir_name(record.name, index)
                 for index, where in placed.items()}
        held: dict[int, uuid.UUID | None | _Unread] = dict.fromkeys(placed, None)
        existing = [index for index, where in placed.items() if where.existed]
        read = read_small_files([os.path.join(paths[index], PARTITION_METADATA)
                                 for index in existing], PARTITION_METADATA_MAX, threads)
        for index, got in zip(existing, read, strict=True):
            target = os.path.join(paths[index], PARTITION_METADATA)
            try:
                if isinstance(got, OSError):
                    raise UnreadablePartitionMetadata(f"{target}: {got}")
                held[index] = None if got is None else parse_partition_metadata(target, got)
            except UnreadablePartitionMetadata as exc:
                results[index] = exc

        def prepare(index: int) -> tuple[Path, bool] | Exception:
            try:
                return self._prepare_dir(record, index, placed[index], held[index])
            except Exception as exc:  # noqa: BLE001 - handed to the caller per partition
                return exc

        # a new log's dir is made and its partition.metadata written and fsynced (a
        # topic created): those overlap on the threads as the opens do; a restart's
        # dirs hold the topic's id already and need no file call
        to_write = [index for index in placed if index not in results
                    and (not placed[index].existed or held[index] != record.topic_id)]
        prepared = dict.fromkeys(to_write)
        if threads > 1 and len(to_write) > 1:
            with ThreadPoolExecutor(min(threads, len(to_write)),
                                    thread_name_prefix="log-open") as pool:
                prepared.update(zip(to_write, pool.map(prepare, to_write), strict=True))
        else:
            prepared.update((index, prepare(index)) for index in to_write)
        ready: dict[int, tuple[Path, bool]] = {}
        for index in placed:
            if index in results:
                continue
            got = prepared[index] if index in prepared else prepare(index)
            if isinstance(got, Exception):
                results[index] = got
            else:
                assert got is not None
                ready[index] = got
        offsets = {index: self._open_offsets(record.name, index, placed[index], replaced)
                   for index, (_, replaced) in ready.items()}
        order = list(ready)
        logs = open_logs([str(ready[index][0]) for index in order],
                         [offsets[index].recovery_point for index in order],
                         [offsets[index].log_start for index in order],
                         [offsets[index].clean for index in order],
                         threads, **configured[1])  # type: ignore[arg-type]
        opened = dict(zip(order, logs, strict=True))
        leading = [index for index in order if wanted[index] is not None
                   and not isinstance(opened[index], BaseException)]
        # nothing can append to a log not yet registered: the log end is the one
        # make_leader would record the epoch at (see open_partition_async)
        failed = assign_leader_epochs([opened[index] for index in leading],  # type: ignore[misc]
                                      [wanted[index] for index in leading], threads)
        for index, error in zip(leading, failed, strict=True):
            if error is not None:
                opened[index] = error
        for index in order:
            got = opened[index]
            if isinstance(got, BaseException):
                results[index] = got if isinstance(got, Exception) else Exception(got)
                continue
            partition = Partition(
                record.name, index, ready[index][0], configured[0], opened=got,
                recovery_point=offsets[index].recovery_point,
                log_start_offset=offsets[index].log_start, clean_shutdown=offsets[index].clean,
                high_watermark=offsets[index].high_watermark, failures=self.failures)
            results[index] = _Opened(partition, offsets[index].recovers, started,
                                     ready[index][1])
        return results

    def _prepare_dir(self, record: TopicRecord, index: int, placed: _Placed,
                     held: uuid.UUID | None | _Unread) -> tuple[Path, bool]:
        """A partition's dir made ready for its log to open: a dir holding an earlier
        topic's log deleted, a missing one made, the topic id written to its
        partition.metadata. `held`: what that file holds, when the caller read it.
        Returns the dir and whether an earlier topic's log was deleted from it."""
        path = placed.directory / partition_dir_name(record.name, index)
        existed, replaced = placed.existed, False
        if existed:
            if isinstance(held, _Unread):
                held = read_partition_metadata(path)
            if self._holds_other_topic(path, record, held):
                _delete_dir(path)
                existed, replaced, held = False, True, None
        else:
            held = None
        if not existed:
            path.mkdir(parents=True, exist_ok=True)
        _write_partition_metadata(path, record.topic_id, held)
        return path, replaced

    def _open_offsets(self, topic: str, index: int, placed: _Placed,
                      replaced: bool) -> _OpenOffsets:
        """The checkpointed offsets a log opens with, and whether it is recovered."""
        key = (topic, index)
        directory = placed.directory
        clean = self._clean.get(directory, False)
        # a replaced log's checkpointed offsets were the earlier topic's
        if replaced:
            return _OpenOffsets(0, 0, 0, clean, False)
        return _OpenOffsets(self._recovery_points.get(directory, {}).get(key, 0),
                            self._log_starts.get(directory, {}).get(key, 0),
                            self._high_watermarks.get(directory, {}).get(key, 0),
                            clean, placed.existed and not clean)

    def _register(self, record: TopicRecord, index: int, directory: Path,
                  opened: _Opened) -> Partition:
        partition, recovers, started, replaced = opened
        key = (record.name, index)
        name = partition_dir_name(record.name, index)
        if replaced:
            self._forget(directory, key)
        self._topic_ids[key] = record.topic_id
        self.partitions[key] = partition
        self._dir_load[directory] += 1
        # what the log held before its recovery cut a torn tail off (the recovery
        # reports the bytes it cut)
        truncated = partition.log.truncated_at_open if recovers else 0
        size_before = partition.log.size_bytes + truncated
        recovered = recovers and size_before > 0
        log.debug("opened %s in %.3f s (%d bytes%s)", name, time.monotonic() - started,
                  size_before, f", recovered, {truncated} bytes truncated" if recovered else "")
        if truncated:
            log.warning("%s: truncated %d bytes of torn or corrupt data at the end of its log "
                        "(an unclean shutdown); the records in them are gone from this "
                        "replica. Nothing to do: a follower fetches them again from its "
                        "leader (with one replica, producers with acks=all were not "
                        "acknowledged for them)", name, truncated)
        self.open_tally.add(time.monotonic() - started, logs=1, bytes=size_before,
                            recovered=int(recovered), truncated=truncated,
                            truncated_logs=int(truncated > 0))
        return partition

    @staticmethod
    def _holds_other_topic(path: Path, record: TopicRecord, held: uuid.UUID | None) -> bool:
        """The dir belongs to an earlier topic of the same name (its partition.metadata
        names another id, `held`: the topic was deleted and created again while this
        broker was down). Its records must not become the new topic's: open_partition
        deletes it, as Kafka's brokers delete such stray logs (KIP-516 topic ids). (A
        partition.metadata that cannot be read raised UnreadablePartitionMetadata
        before: the log is neither deleted nor adopted.)"""
        if record.topic_id == ZERO_UUID:
            return False
        if held in (None, ZERO_UUID, record.topic_id):
            return False
        log.warning("deleting %s: its log is of topic id %s, an earlier topic named %s "
                    "(deleted while this broker was down); the topic now has id %s. Nothing "
                    "to do: the new topic's replica starts empty", path, held, record.name,
                    record.topic_id)
        return True

    def _forget(self, directory: Path, key: tuple[str, int]) -> None:
        """Drop a deleted log's checkpointed offsets, which would apply to the new one."""
        for offsets in (self._recovery_points, self._log_starts, self._high_watermarks):
            offsets.get(directory, {}).pop(key, None)

    def ensure_topic_id(self, record: TopicRecord, index: int) -> None:
        """Write the topic's id into an open partition's partition.metadata when it got
        one late (a ZooKeeper topic created before topic ids)."""
        key = (record.name, index)
        partition = self.partitions.get(key)
        if partition is None or self._topic_ids.get(key) == record.topic_id:
            return
        _write_partition_metadata(partition.directory, record.topic_id)
        self._topic_ids[key] = record.topic_id

    def update_topic_config(self, record: TopicRecord) -> None:
        """Apply the topic's (changed) overrides to its open partitions."""
        config = topic_config(self.config, record)
        for (topic, _), partition in self.partitions.items():
            if topic == record.name:
                partition.set_config(config)

    def reconfigure(self) -> None:
        """Re-apply every open log's topic config (a dynamic broker default changed:
        the logs that do not override it take the new value)."""
        for partition in self.partitions.values():
            partition.set_config(partition.config)

    def delete_topic(self, topic: str) -> None:
        """Drop the topic's logs: each dir is renamed aside here (Kafka's `-delete`
        suffix: a crash mid-delete leaves nothing that would be loaded again, and a
        topic created again under the name starts from a clean dir), and its files are
        removed on a thread of their own. Nothing is flushed (the data is going; Kafka
        only closes a deleted log's handles): flushing and removing a 1,200-partition
        topic on the event loop took it 24 s on a loaded machine, with DeleteTopics
        answered only after."""
        doomed: list[Path] = []
        for key in [k for k in self.partitions if k[0] == topic]:
            partition = self.partitions.pop(key)
            self._dir_load[partition.directory.parent] -= 1
            self._flushes_closed += partition.flushes
            partition.abandon()
            doomed.append(_rename_aside(partition.directory))
        if doomed:
            threading.Thread(target=_remove_dirs, args=(doomed,), name=f"delete-{topic}",
                             daemon=True).start()

    def delete_stray(self, topic: str, index: int) -> bool:
        """Delete a partition dir this broker holds but does not host (not open): a
        replica moved away while the broker was down. True when there was one."""
        if (topic, index) in self.partitions:
            return False
        name = partition_dir_name(topic, index)
        found = False
        for directory in self.dirs:
            path = directory / name
            if path.is_dir():
                _delete_dir(path)
                found = True
        return found

    def delete_partition(self, topic: str, index: int) -> None:
        """Close one partition's log and delete its dir (a replica moved away by a
        reassignment), renamed aside first as delete_topic does."""
        partition = self.partitions.pop((topic, index), None)
        if partition is None:
            return
        self._dir_load[partition.directory.parent] -= 1
        self._flushes_closed += partition.flushes
        partition.close()
        _delete_dir(partition.directory)

    def _least_loaded_dir(self) -> Path:
        online = [d for d in self.dirs if not self.failures.is_offline(d)]
        # with every dir offline the broker halts; until then there is one online
        return min(online or self.dirs, key=lambda d: self._dir_load[d])

    @staticmethod
    def _read_high_watermarks(directory: Path) -> dict[tuple[str, int], int]:
        """The dir's high watermarks. Unreadable ones refuse the start: Kafka takes such
        a dir offline, since a log's committed end can no longer be told (a guess would
        expose uncommitted records to consumers, or hold back committed ones)."""
        path = directory / REPLICATION_FILE
        try:
            return read_checkpoint(path)
        except MalformedCheckpoint as exc:
            raise MalformedCheckpoint(
                f"{exc}: the high watermarks of the logs in {directory} cannot be told, "
                f"so the dir is not used (Kafka takes it offline). Restore the file, or "
                f"move it aside to start with every high watermark at the log's start "
                f"(each leader raises it again as its in-sync replicas catch up)") from exc

    def _check_meta(self, directory: Path) -> None:
        """Refuse a data dir written by another cluster or another broker id, as Kafka's
        brokers do (InconsistentClusterIdException, InconsistentBrokerIdException): a
        zookeeper.connect pointing at the wrong ensemble (or a wiped one), or a copied
        data dir, would otherwise mix its logs into the wrong cluster."""
        path = directory / META_FILE
        try:
            stored = read_properties(path)
        except FileNotFoundError:
            return
        cluster_id = stored.get("cluster.id", "").strip()
        if cluster_id and cluster_id != self.cluster_id:
            raise ConfigError(
                f"{path} is of cluster {cluster_id}, but this broker joined cluster "
                f"{self.cluster_id}: check zookeeper.connect (or log.dirs)")
        broker_id = (stored.get("broker.id") or stored.get("node.id") or "").strip()
        if not broker_id:
            # whose dir it is cannot be told (Kafka requires the id in meta.properties)
            raise ConfigError(f"{path} has no broker.id: remove it only if this dir is "
                              f"broker {self.config.broker_id}'s")
        if broker_id != str(self.config.broker_id):
            raise ConfigError(
                f"{path} is of broker.id {broker_id}, but broker.id is "
                f"{self.config.broker_id}: set broker.id to {broker_id}, or start the new "
                "broker with empty log.dirs")

    def _write_meta(self, directory: Path) -> None:
        path = directory / META_FILE
        if path.exists():
            return
        path.write_text(
            "#\n#pybroker\nversion=0\n"
            f"broker.id={self.config.broker_id}\ncluster.id={self.cluster_id}\n"
        )


ZERO_UUID = uuid.UUID(int=0)


class _Placed(NamedTuple):
    """Where a partition not open yet is to be opened (_place)."""

    directory: Path
    #: its dir exists already (a log to load, or an earlier topic's to replace)
    existed: bool


class _OpenOffsets(NamedTuple):
    """What a log opens with (LogManager._open_offsets)."""

    recovery_point: int
    log_start: int
    high_watermark: int
    #: its dir was shut down cleanly: no recovery
    clean: bool
    #: an existing log opened after an unclean shutdown: recovered from its recovery point
    recovers: bool


class _Opened(NamedTuple):
    """What _open_files hands to _register."""

    partition: Partition
    #: the log was recovered from its recovery point (an unclean shutdown)
    recovers: bool
    #: when the log's own open began (time.monotonic)
    started: float
    #: the dir held an earlier topic's log, deleted: its offsets are forgotten
    replaced: bool


class _Unread:
    """_write_partition_metadata's `current` not given: the file is read."""


UNREAD = _Unread()


def _fsync_dir(path: Path) -> None:
    """fsync a directory: the entries made or removed in it last through a power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _delete_dir(path: Path) -> None:
    """Rename a partition dir aside (Kafka's `-delete` suffix), then delete it: a crash
    mid-delete leaves nothing that would be loaded again."""
    shutil.rmtree(_rename_aside(path), ignore_errors=True)


def _rename_aside(path: Path) -> Path:
    doomed = path.with_name(f"{path.name}.{uuid.uuid4().hex}-delete")
    os.replace(path, doomed)
    return doomed


def _remove_dirs(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


#: a partition dir's topic id file (Kafka's name)
PARTITION_METADATA = "partition.metadata"
#: read of a partition.metadata (Kafka's is two short lines; a longer file is not one)
PARTITION_METADATA_MAX = 4096


class UnreadablePartitionMetadata(ValueError):
    """A partition dir's partition.metadata is there but cannot be read: which topic the
    log is of cannot be told, so it is neither adopted nor deleted (Kafka takes such a
    log's dir offline)."""


def read_partition_metadata(path: Path) -> uuid.UUID | None:
    """The topic id in `path`'s partition.metadata; None when there is no file (a log
    from before topic ids). A file that cannot be read, or is not Kafka's format, raises
    UnreadablePartitionMetadata."""
    target = os.path.join(path, PARTITION_METADATA)
    try:
        # os-level reads: read_text's file object and decoder cost more than the read
        fd = os.open(target, os.O_RDONLY)
        try:
            data = os.read(fd, PARTITION_METADATA_MAX)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadablePartitionMetadata(f"{target}: {exc}") from exc
    return parse_partition_metadata(target, data)


def parse_partition_metadata(target: str, data: bytes) -> uuid.UUID:
    """The topic id in a partition.metadata's bytes (`target` names the file in the
    error); UnreadablePartitionMetadata when they are not Kafka's format."""
    try:
        lines = data.decode().splitlines()
    except UnicodeDecodeError as exc:
        raise UnreadablePartitionMetadata(f"{target}: {exc}") from exc
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise UnreadablePartitionMetadata(f"{target}: not a version 0 partition.metadata")
    encoded = fields["topic_id"].strip()
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except ValueError as exc:
        raise UnreadablePartitionMetadata(f"{target}: bad topic_id {encoded!r}") from exc


def _write_partition_metadata(path: Path, topic_id: uuid.UUID,
                              current: uuid.UUID | None | _Unread = UNREAD) -> None:
    """Kafka's partition.metadata: the topic id, so a recreated topic is told apart.
    Written once the topic has an id; a file without one (or with the zero id) is
    replaced. A different id stays (open_partition deletes such a log first).
    `current`: what the file holds, when the caller read it already."""
    if topic_id == ZERO_UUID:
        return
    if isinstance(current, _Unread):
        current = read_partition_metadata(path)
    if current == topic_id:
        return
    if current not in (None, ZERO_UUID):
        log.warning("%s/partition.metadata names topic id %s, the topic's is %s: the file "
                    "is left as it is. If the topic was deleted and created again, delete "
                    "this partition's dir while the broker is stopped (its replica is then "
                    "fetched from the leader)", path, current, topic_id)
        return
    target = path / PARTITION_METADATA
    tmp = path / f"{PARTITION_METADATA}.tmp"
    encoded = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    with open(tmp, "w") as f:
        f.write(f"version: 0\ntopic_id: {encoded}\n")
        f.flush()
        # fsynced, as Kafka's PartitionMetadataFile: after a power loss the file is
        # whole, and one that cannot be read is refused, not taken for a missing one
        os.fsync(f.fileno())
    os.replace(tmp, target)


def _opened_line(counts: dict[str, int], logs: int, seconds: float) -> str:
    line = f"loaded {logs} logs ({counts['bytes']} bytes) in {seconds:.2f} s"
    if counts["recovered"]:
        line += (f"; {counts['recovered']} recovered after an unclean shutdown "
                 f"({counts['truncated']} bytes truncated from {counts['truncated_logs']} "
                 "of them)")
    return line
