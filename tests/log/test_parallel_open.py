"""A batch of logs (a topic's partitions, after a start) is opened
num.recovery.threads.per.data.dir at a time per data dir, as Kafka loads its logs:
the Rust open runs without the GIL, so one log's recovery scan and fsyncs overlap the
next one's (issue 25, a restart with thousands of partitions)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.log.manager import LogManager
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
def test_a_batch_opens_that_many_logs_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              threads: int) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path),
                           "num.recovery.threads.per.data.dir": str(threads)})
    # every open waits until `threads` opens are under way together (bounded): with
    # fewer at once the barrier breaks and the opens fail
    barrier = threading.Barrier(threads, timeout=10)
    at_once: list[int] = []
    running = [0]
    lock = threading.Lock()
    open_files = LogManager._open_files

    def gathered_open(self: LogManager, *args: object):  # type: ignore[no-untyped-def]
        with lock:
            running[0] += 1
            at_once.append(running[0])
        try:
            barrier.wait()
            return open_files(self, *args)  # type: ignore[arg-type]
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(LogManager, "_open_files", gathered_open)
    record = _record()
    opened = _open(config, record)
    assert all(isinstance(p, Partition) for p in opened.values()), opened
    assert sorted(opened) == list(range(PARTITIONS))
    assert max(at_once) == threads
    # each log is its own, with the lead epoch recorded at its end
    for index, partition in opened.items():
        assert isinstance(partition, Partition)
        assert (partition.topic, partition.index) == ("t", index)
        assert partition.log.latest_epoch == 3


def test_a_failed_open_fails_its_partition_only(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    open_files = LogManager._open_files

    def failing_open(self: LogManager, record: TopicRecord, index: int,  # type: ignore[no-untyped-def]
                     *args: object):
        if index == 5:
            raise OSError("disk says no")
        return open_files(self, record, index, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(LogManager, "_open_files", failing_open)
    opened = _open(config, _record())
    assert isinstance(opened[5], OSError)
    assert all(isinstance(opened[i], Partition) for i in range(PARTITIONS) if i != 5)


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
