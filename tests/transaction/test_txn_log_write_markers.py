"""transaction/markers.write_markers on real partitions (a replicated leader with
its ISR and the purgatory): markers are answered as acks=all produces are, with
each partition's own error, and listeners hear only of replicated markers."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker.config import BrokerConfig, TopicConfig
from pybroker.coordination.base import PartitionState
from pybroker.errors import ErrorCode, KafkaError
from pybroker.log.partition import Partition
from pybroker.purgatory import Purgatory
from pybroker.replica.partition import ReplicaPartition
from pybroker.transaction import markers

PID = 42


def txn_batch(n: int) -> memoryview:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                  producer_id=PID, producer_epoch=0, base_sequence=0,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])
    return memoryview(bytes(b.build()))


class Replicas:
    """The ReplicaManager's routing (leader_for) over a dict of partitions."""

    def __init__(self, partitions: dict[tuple[str, int], ReplicaPartition]) -> None:
        self.partitions = partitions

    def leader_for(self, topic: str, index: int, epoch: int = -1) -> ReplicaPartition:
        p = self.partitions.get((topic, index))
        if p is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        p.check_leader(epoch)
        return p


def setup(tmp_path: Path, isr: list[int], min_isr: int = 1) -> tuple[Any, ReplicaPartition]:
    purgatory = Purgatory()
    log = Partition("t", 0, tmp_path / "t-0",
                    TopicConfig(BrokerConfig({}), {"min.insync.replicas": min_isr}),
                    recovery_point=0, log_start_offset=0, clean_shutdown=False)
    p = ReplicaPartition(log, 1, purgatory)
    p.make_leader(PartitionState(leader=1, leader_epoch=3, replicas=[1, 2], isr=isr))
    ctx = SimpleNamespace(replicas=Replicas({("t", 0): p}), purgatory=purgatory)
    return ctx, p


def test_a_marker_is_answered_once_the_isr_has_it(tmp_path: Path) -> None:
    ctx, p = setup(tmp_path, isr=[1, 2])
    heard: list[tuple[Any, ...]] = []

    def listener(*args: Any) -> None:
        heard.append(args)

    def broken(*args: Any) -> None:
        raise RuntimeError("a listener's bug")

    markers.add_marker_listener(broken)
    markers.add_marker_listener(listener)
    try:
        p.append_as_leader(txn_batch(3), -1)  # 0-2
        p.record_follower_fetch(2, 3)
        assert p.last_stable_offset == 0
        result: dict[Any, ErrorCode] = {}

        async def main() -> None:
            async def write() -> None:
                result.update(await markers.write_markers(
                    ctx, producer_id=PID, producer_epoch=0, coordinator_epoch=0,
                    commit=True, partitions=[("t", 0), ("t", 9), ("t", 0)]))

            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                await anyio.sleep(0.2)
                # appended (offset 3) but the follower lacks it: no answer, no listener
                assert result == {} and heard == []
                assert p.log_end_offset == 4 and p.last_stable_offset == 0
                p.record_follower_fetch(2, 4)

        anyio.run(main)
        assert result == {("t", 0): ErrorCode.NONE,
                          ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert heard == [("t", 0, PID, 0, True, 3)]
        assert p.last_stable_offset == 4
    finally:
        markers.remove_marker_listener(broken)
        markers.remove_marker_listener(listener)


def test_marker_errors_timeout_and_min_isr(tmp_path: Path) -> None:
    ctx, p = setup(tmp_path, isr=[1, 2])
    p.append_as_leader(txn_batch(1), -1)

    async def write(**kw: Any) -> dict[Any, ErrorCode]:
        args = {"producer_id": PID, "producer_epoch": 0, "coordinator_epoch": 5,
                "commit": False, "partitions": [("t", 0)], **kw}
        return await markers.write_markers(ctx, **args)

    # the follower never fetches: REQUEST_TIMED_OUT (the marker is in the log all the same)
    assert anyio.run(lambda: write(timeout_s=0.3)) == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}
    assert p.log.log.aborted_transactions(0, 10) == [(PID, 0)]
    p.record_follower_fetch(2, p.log_end_offset)
    assert anyio.run(lambda: write(coordinator_epoch=4)) == {
        ("t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert anyio.run(lambda: write(producer_epoch=-1)) == {
        ("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    ctx2, p2 = setup(tmp_path / "b", isr=[1], min_isr=2)
    assert anyio.run(lambda: markers.write_markers(
        ctx2, producer_id=PID, producer_epoch=0, coordinator_epoch=0, commit=True,
        partitions=[("t", 0)])) == {("t", 0): ErrorCode.NOT_ENOUGH_REPLICAS}
    p2.make_follower(PartitionState(leader=2, leader_epoch=4, replicas=[1, 2], isr=[1, 2]))
    assert anyio.run(lambda: markers.write_markers(
        ctx2, producer_id=PID, producer_epoch=0, coordinator_epoch=0, commit=True,
        partitions=[("t", 0)])) == {("t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
