"""A follower's fetch that had nothing to answer with waits; woken because one partition
it follows grew, it reads again that partition alone, not every one it follows from
this leader (thousands at 10,000 partitions RF 3: a full pass at every wake-up and
at the deadline was among the event loop's longest stalls, issue 25). The answer is
the one a full pass gives."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import anyio

from pybroker.errors import ErrorCode, KafkaError
from pybroker.fetch.sessions import FetchSessionCache
from pybroker.handlers.fetch import handle_fetch
from pybroker.purgatory import Purgatory
from pybroker.replica.partition import FollowerState, ReplicaPartition

PARTITIONS = 300
FOLLOWER = 2
#: a fetch that waits out its deadline: long enough for the first pass on a loaded machine
DEADLINE_MS = 1500


class _Records:
    def __init__(self, length: int) -> None:
        self.length = length


class _Log:
    def __init__(self) -> None:
        self.log = SimpleNamespace(log_end_offset=5, log_start_offset=0)
        self.high_watermark = 5
        self.offline = False


class _Partition:
    """A partition led here: what the leader's read pass asks of it."""

    def __init__(self, index: int, purgatory: Purgatory) -> None:
        self.topic, self.index = "t", index
        self.log = _Log()
        self.leader, self.leader_epoch = 1, 3
        self.isr = [1, FOLLOWER]
        self.followers = {FOLLOWER: FollowerState()}
        self.leo_key, self.hw_key = ("leo", index), ("hw", index)
        self.fetched: list[int] = []
        self.purgatory = purgatory

    # a follower session's watch of its idle partitions, as a ReplicaPartition keeps it:
    # a test that changes a partition behind its back says so (changed)
    watch_idle = ReplicaPartition.watch_idle
    unwatch_idle = ReplicaPartition.unwatch_idle
    changed = ReplicaPartition.changed

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    last_stable_offset = high_watermark

    @property
    def is_leader(self) -> bool:
        return self.leader == 1

    @property
    def log_end_offset(self) -> int:
        return self.log.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log.log_start_offset

    def record_follower_fetch(self, broker: int, offset: int) -> None:
        self.fetched.append(offset)

    def read(self, offset: int, max_bytes: int, min_one: bool, *, committed_only: bool,
             read_committed: bool) -> _Records | None:
        end = self.log.log.log_end_offset
        return _Records(100 * (end - offset)) if offset < end else None


class _Replicas:
    def __init__(self, purgatory: Purgatory) -> None:
        self.partitions = {("t", i): _Partition(i, purgatory) for i in range(PARTITIONS)}
        self.reads = 0

    def leader_for(self, topic: str, index: int, epoch: int = -1) -> _Partition:
        self.reads += 1
        partition = self.partitions[(topic, index)]
        if partition.leader != 1:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    def leader_throttled(self, partition: Any, follower: int) -> bool:
        return False

    def record_leader_replication(self, partition: Any, follower: int, n: int) -> None:
        pass


def _context() -> tuple[Any, _Replicas, Purgatory]:
    purgatory = Purgatory()
    replicas = _Replicas(purgatory)
    ctx = SimpleNamespace(replicas=replicas, purgatory=purgatory,
                          fetch_sessions=FetchSessionCache(10),
                          metadata=SimpleNamespace(topic_name=lambda _: None),
                          metrics=SimpleNamespace(record_fetch_errors=lambda _: None),
                          config={})
    return ctx, replicas, purgatory


def _request(max_wait_ms: int, session: tuple[int, int] = (0, -1),
             partitions: int = PARTITIONS) -> Any:
    body = {"replica_id": FOLLOWER, "max_wait_ms": max_wait_ms, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": session[0],
            "session_epoch": session[1], "forgotten_topics_data": [],
            "topics": [{"topic": "t", "partitions": [
                {"partition": i, "current_leader_epoch": 3, "fetch_offset": 5,
                 "log_start_offset": 0, "partition_max_bytes": 1 << 20}
                for i in range(partitions)]}] if partitions else []}
    return SimpleNamespace(body=body, version=12, received_ms=time.monotonic(),
                           connection=None, header=None)


def _run(max_wait_ms: int, while_waiting: Any) -> tuple[dict[str, Any], _Replicas, int]:
    ctx, replicas, purgatory = _context()
    out: dict[str, Any] = {}
    first_pass: list[int] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            async def fetch() -> None:
                out.update(await handle_fetch(ctx, _request(max_wait_ms)))
            tg.start_soon(fetch)
            with anyio.fail_after(30):
                while not purgatory.waiting["fetch"]:
                    await anyio.sleep(0.001)
            first_pass.append(replicas.reads)
            while_waiting(replicas, purgatory)

    anyio.run(main)
    return out, replicas, first_pass[0]


def _answered(out: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {p["partition_index"]: p for t in out["responses"] for p in t["partitions"]}


def test_woken_by_one_partition_it_reads_that_one_again() -> None:
    def append(replicas: _Replicas, purgatory: Purgatory) -> None:
        grown = replicas.partitions[("t", 17)]
        grown.log.log.log_end_offset = 7
        purgatory.notify(grown.leo_key)

    out, replicas, first = _run(30_000, append)
    assert first == PARTITIONS
    assert replicas.reads - first == 1  # the old code read all 300 again
    answers = _answered(out)
    assert len(answers) == PARTITIONS and all(a["error_code"] == 0 for a in answers.values())
    assert answers[17]["records"].length == 200
    assert all(a["records"] == b"" for i, a in answers.items() if i != 17)
    # every partition was recorded as fetched once, at the first pass, the one read
    # again too (a pass after a wait is no new fetch of the follower's, issue 26)
    assert replicas.partitions[("t", 3)].fetched == [5]
    assert replicas.partitions[("t", 17)].fetched == [5]


def test_at_the_deadline_nothing_moved_is_not_read_again() -> None:
    def nothing(replicas: _Replicas, purgatory: Purgatory) -> None:
        pass

    out, replicas, first = _run(DEADLINE_MS, nothing)
    assert replicas.reads == first == PARTITIONS  # the old code: 600
    assert len(_answered(out)) == PARTITIONS


def test_a_high_watermark_moved_meanwhile_is_answered_fresh() -> None:
    def moved(replicas: _Replicas, purgatory: Purgatory) -> None:
        replicas.partitions[("t", 40)].log.high_watermark = 6  # another follower's fetch

    out, replicas, first = _run(DEADLINE_MS, moved)
    assert replicas.reads - first == 1
    assert _answered(out)[40]["high_watermark"] == 6


def test_leadership_lost_meanwhile_answers_from_a_full_pass() -> None:
    def lost(replicas: _Replicas, purgatory: Purgatory) -> None:
        gone = replicas.partitions[("t", 9)]
        gone.leader, gone.leader_epoch = 3, 4
        purgatory.notify(gone.hw_key)

    out, replicas, first = _run(DEADLINE_MS, lost)
    answers = _answered(out)
    assert answers[9]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert all(a["error_code"] == 0 for i, a in answers.items() if i != 9)
    assert replicas.reads - first == 1 + PARTITIONS  # the moved one, then the full pass


def test_records_held_back_are_read_again() -> None:
    ctx, replicas, purgatory = _context()
    held = replicas.partitions[("t", 5)]
    held.log.log.log_end_offset = 9  # records past the follower's offset 5...
    throttled = [True]  # ...held back by a replication throttle at the first pass
    replicas.leader_throttled = lambda p, f: p is held and throttled[0]  # type: ignore
    out: dict[str, Any] = {}

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            async def fetch() -> None:
                out.update(await handle_fetch(ctx, _request(30_000)))
            tg.start_soon(fetch)
            with anyio.fail_after(30):
                while not purgatory.waiting["fetch"]:
                    await anyio.sleep(0.001)
            throttled[0] = False
            other = replicas.partitions[("t", 6)]  # something else wakes the fetch
            other.log.log.log_end_offset = 6
            purgatory.notify(other.leo_key)

    anyio.run(main)
    answers = _answered(out)
    assert answers[5]["records"].length == 400 and answers[6]["records"].length == 100
    assert replicas.reads == PARTITIONS + 2


def test_an_incremental_fetch_reads_only_what_moved() -> None:
    """In a fetch session, a partition at the log end whose watermarks were told is
    idle: recorded as fetched (its ISR lag), not read, not answered."""
    ctx, replicas, _ = _context()

    async def fetch(request: Any) -> dict[str, Any]:
        with anyio.fail_after(30):
            return await handle_fetch(ctx, request)  # type: ignore[no-any-return]

    full = anyio.run(fetch, _request(0, (0, 0)))
    assert len(_answered(full)) == PARTITIONS and replicas.reads == PARTITIONS
    grown = replicas.partitions[("t", 17)]
    grown.log.log.log_end_offset = 8
    grown.changed(wake=True)
    incremental = anyio.run(fetch, _request(0, (full["session_id"], 1), partitions=0))
    assert incremental["error_code"] == 0
    answers = _answered(incremental)
    assert list(answers) == [17] and answers[17]["records"].length == 300
    assert replicas.reads == PARTITIONS + 1  # the old code: PARTITIONS * 2
    assert all(p.fetched == [5, 5] for p in replicas.partitions.values())
    # a leadership lost since is read (and answered with its error), not idle
    lost = replicas.partitions[("t", 3)]
    lost.leader, lost.leader_epoch = 3, 4
    lost.changed()
    again = anyio.run(fetch, _request(0, (full["session_id"], 2), partitions=0))
    assert _answered(again)[3]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_follower_fetch_of_one_slice_keeps_no_repass(monkeypatch: Any) -> None:
    """A follower at the log end of the few partitions it follows from this leader (the
    usual acks=all round trip): its fetch records every position once, waits, and on
    the append answers that partition's records from a plain pass again; keeping a
    Repass (a snapshot and a re-check) for one slice cost about what it saves, at every
    parked fetch (issue 26)."""
    import pybroker.handlers.fetch as fetch

    built: list[object] = []

    class Counted(fetch.Repass):
        def __init__(self, *args: Any) -> None:
            built.append(self)
            super().__init__(*args)

    monkeypatch.setattr(fetch, "Repass", Counted)
    ctx, replicas, purgatory = _context()
    few = 3
    replicas.partitions = {("t", i): replicas.partitions[("t", i)] for i in range(few)}

    async def fetch_now(request: Any) -> dict[str, Any]:
        with anyio.fail_after(30):
            return await handle_fetch(ctx, request)  # type: ignore[no-any-return]

    full = anyio.run(fetch_now, _request(0, (0, 0), partitions=few))
    assert len(_answered(full)) == few
    out: dict[str, Any] = {}

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            async def parked() -> None:
                out.update(await handle_fetch(
                    ctx, _request(30_000, (full["session_id"], 1), partitions=0)))
            tg.start_soon(parked)
            with anyio.fail_after(30):
                while not purgatory.waiting["fetch"]:
                    await anyio.sleep(0.001)
            grown = replicas.partitions[("t", 1)]
            grown.log.log.log_end_offset = 6
            grown.changed(wake=True)  # as an append does
            purgatory.notify(grown.leo_key)

    anyio.run(main)
    assert built == []  # the old code kept one for this fetch
    assert list(_answered(out)) == [1] and _answered(out)[1]["records"].length == 100
    # the full fetch, then the idle first pass: each position recorded once a fetch
    assert all(p.fetched == [5, 5] for p in replicas.partitions.values())
