"""A follower's incremental fetch round on the leader costs O(partitions that changed),
not O(partitions in its session) (issue 25): a partition found idle (the follower at the
log end, everything as last told) is watched, and until it changes no round looks at it,
records its position or registers a purgatory key for it. What is answered is what a
look at every partition gives, and the follower's caught-up time (the ISR shrink clock)
moves with the session's rounds. On real logs and ReplicaPartitions."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker.config import BrokerConfig, TopicConfig
from pybroker.coordination.base import PartitionState
from pybroker.fetch.sessions import FetchSessionCache
from pybroker.handlers.fetch import handle_fetch
from pybroker.log import retention
from pybroker.log.partition import Partition
from pybroker.purgatory import Purgatory
from pybroker.replica.partition import ReplicaPartition

PARTITIONS = 40
LEADER, FOLLOWER, OTHER = 1, 2, 3


def batch(n: int) -> memoryview:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=int(time.time() * 1000), key=b"k", value=b"v", headers=[])
    return memoryview(bytes(b.build()))


class _Counting(dict):  # type: ignore[type-arg]
    """The replicas' partitions, counting the look-ups of a fetch's idle checks."""

    gets = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.gets += 1
        return super().get(key, default)


class _Replicas:
    def __init__(self, partitions: dict[tuple[str, int], ReplicaPartition]) -> None:
        self.partitions = _Counting(partitions)
        self.reads = 0

    def leader_for(self, topic: str, index: int, epoch: int = -1) -> ReplicaPartition:
        self.reads += 1
        partition = dict.__getitem__(self.partitions, (topic, index))
        partition.check_leader(epoch)
        return partition  # type: ignore[no-any-return]

    def leader_throttled(self, partition: Any, follower: int) -> bool:
        return False

    def record_leader_replication(self, partition: Any, follower: int, n: int) -> None:
        pass


class Cluster:
    """PARTITIONS partitions led here (ISR 1, 2, 3, 5 records each, every follower at
    the end), and the leader's Fetch handler."""

    def __init__(self, tmp_path: Path) -> None:
        self.purgatory = Purgatory()
        config = TopicConfig(BrokerConfig({}), {})
        parts = {}
        for i in range(PARTITIONS):
            log = Partition("t", i, tmp_path / f"t-{i}", config, recovery_point=0,
                            log_start_offset=0, clean_shutdown=False)
            p = ReplicaPartition(log, LEADER, self.purgatory)
            p.make_leader(PartitionState(leader=LEADER, leader_epoch=3,
                                         replicas=[LEADER, FOLLOWER, OTHER],
                                         isr=[LEADER, FOLLOWER, OTHER]))
            p.append_as_leader(batch(5), required_acks=1)
            p.record_follower_fetch(FOLLOWER, 5)
            p.record_follower_fetch(OTHER, 5)
            parts[("t", i)] = p
        assert all(p.high_watermark == 5 for p in parts.values())
        self.replicas = _Replicas(parts)
        self.ctx = SimpleNamespace(
            replicas=self.replicas, purgatory=self.purgatory,
            fetch_sessions=FetchSessionCache(10),
            metadata=SimpleNamespace(topic_name=lambda _: None),
            metrics=SimpleNamespace(record_fetch_errors=lambda _: None), config={})
        self.session = (0, 0)

    def partition(self, index: int) -> ReplicaPartition:
        return dict.__getitem__(self.replicas.partitions, ("t", index))  # type: ignore

    def request(self, max_wait_ms: int, offsets: dict[int, int]) -> Any:
        body = {"replica_id": FOLLOWER, "max_wait_ms": max_wait_ms, "min_bytes": 1,
                "max_bytes": 1 << 20, "isolation_level": 0, "session_id": self.session[0],
                "session_epoch": self.session[1], "forgotten_topics_data": [],
                "topics": [{"topic": "t", "partitions": [
                    {"partition": i, "current_leader_epoch": 3, "fetch_offset": offset,
                     "log_start_offset": 0, "partition_max_bytes": 1 << 20}
                    for i, offset in offsets.items()]}] if offsets else []}
        return SimpleNamespace(body=body, version=12, received_ms=time.monotonic(),
                               connection=None, header=None)

    async def fetch(self, offsets: dict[int, int], max_wait_ms: int = 0
                    ) -> dict[int, dict[str, Any]]:
        with anyio.fail_after(30):
            out = await handle_fetch(self.ctx, self.request(max_wait_ms, offsets))
        assert out["error_code"] == 0
        self.session = (out["session_id"], self.session[1] + 1)
        return {p["partition_index"]: p for t in out["responses"] for p in t["partitions"]}

    def full_then_first_round(self) -> None:
        """The full fetch (every partition answered), then the first incremental round
        (every partition found idle, recorded and watched)."""
        assert len(anyio.run(self.fetch, dict.fromkeys(range(PARTITIONS), 5))) == PARTITIONS
        assert anyio.run(self.fetch, {}) == {}


def test_an_idle_round_looks_at_no_partition(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(tmp_path)
    cluster.full_then_first_round()
    recorded: list[int] = []
    monkeypatch.setattr(ReplicaPartition, "record_follower_fetch",
                        lambda self, broker, offset: recorded.append(self.index))
    gets, reads = cluster.replicas.partitions.gets, cluster.replicas.reads
    assert anyio.run(cluster.fetch, {}) == {}
    # the old code looked every partition up (_follower_idle) and recorded each one's
    # position: PARTITIONS each, at every round
    assert cluster.replicas.partitions.gets - gets == 0
    assert cluster.replicas.reads - reads == 0
    assert recorded == []


def test_a_parked_round_waits_on_one_key_and_answers_what_changed(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.full_then_first_round()
    purgatory = cluster.purgatory
    answers: dict[int, dict[str, Any]] = {}
    keys: list[int] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            async def parked() -> None:
                answers.update(await cluster.fetch({}, max_wait_ms=30_000))
            tg.start_soon(parked)
            with anyio.fail_after(30):
                while not purgatory.waiting["fetch"]:
                    await anyio.sleep(0.001)
            keys.append(len(purgatory._watchers))
            cluster.partition(17).append_as_leader(batch(3), required_acks=1)

    anyio.run(main)
    assert keys == [1]  # the old code: one key per partition (PARTITIONS)
    assert list(answers) == [17] and answers[17]["records"].length > 0
    assert answers[17]["high_watermark"] == 5


def test_the_high_watermark_moved_by_another_follower_is_answered(tmp_path: Path) -> None:
    """Follower 2 fetches partition 17's new records and stops at the end; the high
    watermark moves only once follower 3 has them too, and follower 2's next round
    answers it (watched meanwhile, the partition is looked at again when it moves)."""
    cluster = Cluster(tmp_path)
    cluster.full_then_first_round()
    p = cluster.partition(17)
    p.append_as_leader(batch(3), required_acks=-1)
    assert list(anyio.run(cluster.fetch, {})) == [17]
    assert anyio.run(cluster.fetch, {17: 8}) == {}  # at the end; HW as told (5)
    assert p.high_watermark == 5  # broker 3 has not fetched them
    assert anyio.run(cluster.fetch, {}) == {}  # watched again
    p.record_follower_fetch(OTHER, 8)
    assert p.high_watermark == 8
    answers = anyio.run(cluster.fetch, {})
    assert list(answers) == [17] and answers[17]["high_watermark"] == 8
    assert answers[17]["records"] == b""
    assert anyio.run(cluster.fetch, {}) == {}


def test_a_leadership_or_log_start_change_is_answered(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.full_then_first_round()
    moved = cluster.partition(4)
    moved.make_leader(PartitionState(leader=LEADER, leader_epoch=4,
                                     replicas=[LEADER, FOLLOWER, OTHER],
                                     isr=[LEADER, FOLLOWER, OTHER]))
    assert anyio.run(cluster.fetch, {}).get(4, {}).get("error_code") == 74  # FENCED
    # retention moved a log start meanwhile (on its worker thread, telling nobody
    # partition by partition): every watched partition is looked at again
    started = cluster.partition(9)
    started.log.log.roll()
    started.log.log.advance_log_start_offset(5)
    retention.starts_moved += 1
    answers = anyio.run(cluster.fetch, {})
    assert answers[9]["log_start_offset"] == 5


def test_a_watched_partition_keeps_its_follower_caught_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ISR shrink clock: a follower fetching a watched partition at every round is
    caught up as of its last round, as if each position had been recorded; one that
    stops fetching falls behind from its last round."""
    import pybroker.fetch.idle as idle
    import pybroker.replica.partition as partition

    clock = [1_000_000]
    monkeypatch.setattr(partition, "_now_ms", lambda: clock[0])
    monkeypatch.setattr(idle, "_now_ms", lambda: clock[0])
    cluster = Cluster(tmp_path)
    cluster.full_then_first_round()
    p = cluster.partition(30)
    lag_ms = 10_000
    for _ in range(3):
        clock[0] += 8_000
        assert anyio.run(cluster.fetch, {}) == {}
        clock[0] += 1_000
        assert FOLLOWER in (p.isr_to_shrink(lag_ms) or p.isr)  # 3, not fetching, goes
    last_round = clock[0] - 1_000
    assert p.followers[FOLLOWER].caught_up_ms() == last_round
    # follower 3 never fetched since the start: out
    assert p.isr_to_shrink(lag_ms) == [LEADER, FOLLOWER]
    # the partition changes: the follower's state takes its last round for good
    p.append_as_leader(batch(1), required_acks=1)
    assert p.followers[FOLLOWER].idle is None
    assert p.followers[FOLLOWER].last_caught_up_ms == last_round
    clock[0] = last_round + lag_ms + 1
    assert p.isr_to_shrink(lag_ms) == [LEADER]


def test_a_follower_outside_the_isr_is_looked_at_every_round(tmp_path: Path) -> None:
    """Its fetch at the log end makes it an ISR candidate each time, as before."""
    cluster = Cluster(tmp_path)
    candidates: list[int] = []
    p = cluster.partition(3)
    p.make_leader(PartitionState(leader=LEADER, leader_epoch=3,
                                 replicas=[LEADER, FOLLOWER, OTHER], isr=[LEADER, OTHER]))
    p._on_isr_candidate = lambda part: candidates.append(part.index)
    cluster.full_then_first_round()
    anyio.run(cluster.fetch, {})
    anyio.run(cluster.fetch, {})
    assert candidates == [3, 3, 3, 3]  # full fetch, three incremental rounds
