"""Taking on a new topic without holding the event loop (issue 25): a partition this
broker is to lead gets its leader epoch recorded (the leader-epoch-checkpoint written
and fsynced) on the worker thread that opens its log, not on the loop by make_leader."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.log.manager import LogManager
from pybroker.metadata.cache import MetadataCache
from pybroker.purgatory import Purgatory
from pybroker.replica.fetcher import ReplicaFetcherManager
from pybroker.replica.manager import ReplicaManager
from pybroker.replica.partition import ReplicaPartition


@pytest.mark.parametrize("leaders_later", [False, True])
def test_a_new_leaders_epoch_is_recorded_off_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leaders_later: bool) -> None:
    """leaders_later: the topic arrives first without partition states (no leaders, as
    the controller writes them after the topic), then with them."""
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    logs = LogManager(config, "cluster")
    logs.startup()
    replicas = ReplicaManager(0, logs, Purgatory(),
                              ReplicaFetcherManager(0, MetadataCache("cluster"), config))
    # partitions 0-3 led here at epoch 5, 4-5 followed (another broker leads)
    record = TopicRecord("t", uuid.uuid4(), [
        PartitionState(leader=0 if i < 4 else 1, leader_epoch=5, replicas=[0, 1], isr=[0, 1])
        for i in range(6)], {})
    epoch_when_led: dict[int, int | None] = {}
    opened_on: set[int] = set()
    open_files = LogManager._open_files
    make_leader = ReplicaPartition.make_leader

    def recording_open(self: LogManager, *args: object):  # type: ignore[no-untyped-def]
        opened_on.add(threading.get_ident())
        return open_files(self, *args)  # type: ignore[arg-type]

    def recording_leader(self: ReplicaPartition, state: PartitionState,
                         version: int = -1) -> bool:
        epoch_when_led[self.index] = self.log.log.latest_epoch
        return make_leader(self, state, version)

    monkeypatch.setattr(LogManager, "_open_files", recording_open)
    monkeypatch.setattr(ReplicaPartition, "make_leader", recording_leader)

    async def main() -> int:
        if leaders_later:
            await replicas.apply_topic_async(TopicRecord("t", record.topic_id, [
                PartitionState(leader=-1, leader_epoch=-1, replicas=[0, 1], isr=[])
                for _ in range(6)], {}))
            assert all(replicas.get("t", i) is not None for i in range(6))
        await replicas.apply_topic_async(record)
        return threading.get_ident()

    loop_thread = anyio.run(main)
    assert opened_on and loop_thread not in opened_on
    # the epoch was in the log's cache (and its file) before make_leader ran on the loop
    assert epoch_when_led == dict.fromkeys(range(4), 5)
    for index in range(6):
        partition = replicas.get("t", index)
        assert partition is not None
        assert partition.is_leader == (index < 4)
        checkpoint = (tmp_path / f"t-{index}" / "leader-epoch-checkpoint")
        if index < 4:
            assert checkpoint.read_text().splitlines() == ["0", "1", "5 0"]
        else:  # a follower records the epochs of what it fetches, not the leader's epoch
            assert partition.log.log.latest_epoch is None
    logs.shutdown()
