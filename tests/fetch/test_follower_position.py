"""A follower's fetch that waits in the purgatory notes the follower's position once,
from its request, as Kafka's does (a delayed fetch's read is readFromPurgatory and
updates no follower state): the pass after the wait reads what came meanwhile and is
not a new fetch of the follower's (issue 26)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import anyio

from pybroker.fetch.sessions import FINAL_EPOCH, FetchSessionCache
from pybroker.handlers.fetch import handle_fetch
from pybroker.purgatory import Purgatory
from pybroker.replica.partition import leo_key

FOLLOWER = 2


class _Records:
    length = 100


class _Partition:
    """A led partition that records what the leader is told of its follower."""

    topic, index = "t", 0
    leader_epoch = 3
    high_watermark = last_stable_offset = 5
    log_start_offset = 0

    leader = 1

    def __init__(self) -> None:
        self.followers = {FOLLOWER: object()}
        # what a woken pass looks at to tell whether to read the partition again
        self.log = SimpleNamespace(log=SimpleNamespace(log_end_offset=5, log_start_offset=0),
                                   high_watermark=5)
        self.leo_key = leo_key(self.topic, self.index)
        self.positions: list[tuple[int, int]] = []
        self.appended = False

    def record_follower_fetch(self, broker_id: int, fetch_offset: int) -> None:
        self.positions.append((broker_id, fetch_offset))

    def read(self, offset: int, max_bytes: int, min_one: bool, **_: Any) -> _Records | None:
        return _Records() if self.appended else None


class _Replicas:
    def __init__(self, partition: _Partition) -> None:
        self.partition = partition

    def leader_for(self, topic: str, index: int, epoch: int) -> _Partition:
        assert (topic, index, epoch) == ("t", 0, 3)
        return self.partition

    def leader_throttled(self, partition: _Partition, follower: int) -> bool:
        return False

    def record_leader_replication(self, partition: _Partition, follower: int,
                                  nbytes: int) -> None:
        pass


def _follower_fetch(max_wait_ms: int) -> SimpleNamespace:
    body = {"replica_id": FOLLOWER, "max_wait_ms": max_wait_ms, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": FINAL_EPOCH, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": 3, "fetch_offset": 5,
                 "last_fetched_epoch": 3, "log_start_offset": 0,
                 "partition_max_bytes": 1 << 20}]}]}
    return SimpleNamespace(version=12, body=body, connection=None,
                           received_ms=time.monotonic())


def _context(partition: _Partition) -> SimpleNamespace:
    return SimpleNamespace(fetch_sessions=FetchSessionCache(10), replicas=_Replicas(partition),
                           purgatory=Purgatory(), metadata=SimpleNamespace(topic_name=None),
                           metrics=SimpleNamespace())


def test_a_woken_follower_fetch_records_the_position_once() -> None:
    partition = _Partition()
    ctx = _context(partition)

    async def run() -> dict[str, Any]:
        answer: dict[str, Any] = {}

        async def fetch() -> None:
            answer.update(await handle_fetch(ctx, _follower_fetch(30_000)))  # type: ignore[arg-type]

        async with anyio.create_task_group() as tg:
            tg.start_soon(fetch)
            with anyio.fail_after(10):
                while ctx.purgatory.size == 0:  # parked: nothing past offset 5 yet
                    await anyio.sleep(0.001)
            partition.appended = True
            partition.log.log.log_end_offset = 6
            ctx.purgatory.notify(partition.leo_key)
        return answer

    answer = anyio.run(run)
    (topic,) = answer["responses"]
    (read,) = topic["partitions"]
    assert read["error_code"] == 0 and read["records"].length == 100
    assert partition.positions == [(FOLLOWER, 5)]  # not again after the wait


def test_a_follower_fetch_that_runs_out_records_the_position_once() -> None:
    partition = _Partition()
    answer = anyio.run(handle_fetch, _context(partition), _follower_fetch(20))
    (topic,) = answer["responses"]
    assert topic["partitions"][0]["records"] == b""
    assert partition.positions == [(FOLLOWER, 5)]
