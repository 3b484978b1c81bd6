"""A batch of logs (a topic's partitions, after a start) is opened
num.recovery.threads.per.data.dir at a time per data dir, as Kafka loads its logs, in
one Rust call without the GIL, so one log's recovery scan and fsyncs overlap the next
one's and no log's open waits for the GIL (issue 25, a restart with thousands of
partitions)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import anyio
import pytest

from pybroker._core import StorageError, open_logs
from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.log import manager
from pybroker.log.manager import LogManager, UnreadablePartitionMetadata
from pybroker.log.partition import Partition

PARTITIONS = 12


def _record() -> TopicRecord:
    return TopicRecord("t", uuid.uuid4(), [
        PartitionState(leader=0, leader_epoch=3, replicas=[0], isr=[0])
        for _ in range(PARTITIONS)], {})


def _open(config: BrokerConfig, record: TopicRecord) -> dict[int, Partition | Exception]:
    logs = LogManager(config, "cluster")
    logs.startup()

    async def main() -> dict[int, Partition | Exception]:
        return await logs.open_partitions_async(record, dict.fromkeys(range(PARTITIONS), 3))

    try:
        return anyio.run(main)
    finally:
        logs.shutdown()


@pytest.mark.parametrize("threads", [1, 3])
def test_a_batch_opens_in_one_call_that_many_logs_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path),
                           "num.recovery.threads.per.data.dir": str(threads)})
    calls: list[tuple[int, int]] = []

    def counted_open(paths: list[str], *args: object, **options: object) -> object:
        calls.append((len(paths), args[3]))  # type: ignore[arg-type]
        return open_logs(paths, *args, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(manager, "open_logs", counted_open)
    record = _record()
    opened = _open(config, record)
    assert all(isinstance(p, Partition) for p in opened.values()), opened
    assert sorted(opened) == list(range(PARTITIONS))
    # the whole batch in one call without the GIL, num.recovery.threads.per.data.dir
    # logs at a time: a log opened from Python threads took the GIL back several times
    assert calls == [(PARTITIONS, threads)]
    # each log is its own, with the lead epoch recorded at its end
    for index, partition in opened.items():
        assert isinstance(partition, Partition)
        assert (partition.topic, partition.index) == ("t", index)
        assert partition.log.latest_epoch == 3
        assert partition.directory == tmp_path / f"t-{index}"
    # and opened again from the files, after a clean shutdown
    calls.clear()
    again = _open(config, record)
    assert calls == [(PARTITIONS, threads)]
    assert all(isinstance(p, Partition) and p.log.latest_epoch == 3 for p in again.values())


def test_a_failed_open_fails_its_partition_only(tmp_path: Path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    record = _record()
    _open(config, record)
    # partition 5's segment is a directory: its log cannot open; partition 7's
    # partition.metadata cannot be read, which topic it is of is not known
    segment = tmp_path / "t-5" / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()
    (tmp_path / "t-7" / "partition.metadata").write_bytes(b"\xff\xfe")
    opened = _open(config, record)
    assert isinstance(opened[5], StorageError), opened[5]
    assert isinstance(opened[7], UnreadablePartitionMetadata), opened[7]
    assert all(isinstance(opened[i], Partition) for i in range(PARTITIONS) if i not in (5, 7))


@pytest.mark.parametrize("threads", [1, 3])
def test_a_clean_shutdown_closes_that_many_logs_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    # as Kafka's LogManager.shutdown: each close is a few fsyncs, one log after another
    # took 14-25 s to exit with 3,000 partitions
    config = BrokerConfig({"log.dirs": str(tmp_path),
                           "num.recovery.threads.per.data.dir": str(threads)})
    logs = LogManager(config, "cluster")
    logs.startup()
    record = _record()

    async def main() -> dict[int, Partition | Exception]:
        return await logs.open_partitions_async(record, dict.fromkeys(range(PARTITIONS), 3))

    opened = anyio.run(main)
    barrier = threading.Barrier(threads, timeout=10)
    closed: list[int] = []
    close = Partition.close

    def gathered_close(self: Partition) -> None:
        barrier.wait()  # broken (raises) unless `threads` closes are under way together
        close(self)
        closed.append(self.index)

    monkeypatch.setattr(Partition, "close", gathered_close)
    logs.shutdown()
    assert sorted(closed) == list(range(PARTITIONS))
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    # every log was closed for real: its active segment's preallocated index trimmed
    for index, partition in opened.items():
        assert isinstance(partition, Partition) and partition.closed
        assert (tmp_path / f"t-{index}" / "00000000000000000000.index").stat().st_size == 0
