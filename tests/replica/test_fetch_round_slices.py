"""A follower's fetch round over thousands of partitions followed from one leader
builds its request without holding the event loop for the whole pass (issue 25): at
3,000 partitions RF 3 on a loaded machine that pass was single stalls of 1-2 s."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.metadata.cache import MetadataCache
from pybroker.replica.fetcher import FetchState, ReplicaFetcher
from tests.loop_turns import Turns

PARTITIONS = 300
#: what one partition costs the pass in this test (a loaded machine's)
PARTITION_S = 0.001


class _Log:
    def __init__(self, turns: Turns) -> None:
        self._turns = turns
        self.log = object()  # the Rust log the answer's records go to

    @property
    def offline(self) -> bool:
        time.sleep(PARTITION_S)  # holds the loop, as a partition's share of the pass does
        self._turns.note()
        return False


class _Asked(Exception):
    pass


class _Connection:
    """Takes the request and fails it: the test is about building it."""

    timeout_s = 30.0

    def __init__(self) -> None:
        self.asked: dict[str, Any] = {}

    async def request_fetch(self, body: dict[str, Any], logs: Any, timeout_s: float) -> Any:
        self.asked = body
        raise _Asked


def test_a_fetch_round_gives_other_tasks_turns(tmp_path: Path) -> None:
    fetcher = ReplicaFetcher(1, 0, MetadataCache("cluster"),
                             BrokerConfig({"log.dirs": str(tmp_path)}))
    turns = Turns()
    for i in range(PARTITIONS):
        partition = SimpleNamespace(topic="t", index=i, log=_Log(turns),
                                    log_start_offset=0)
        fetcher.states[("t", i)] = FetchState(partition, 3, fetch_offset=7,  # type: ignore[arg-type]
                                              truncated=True)
    connection = _Connection()

    async def round_trip() -> None:
        with pytest.raises(_Asked):
            await fetcher._fetch_once(connection)  # type: ignore[arg-type]

    turns.run(round_trip)
    seen = turns.seen
    (topic,) = connection.asked["topics"]
    assert [p["partition"] for p in topic["partitions"]] == list(range(PARTITIONS))
    assert all(p["fetch_offset"] == 7 and p["current_leader_epoch"] == 3
               for p in topic["partitions"])
    assert len(seen) == PARTITIONS
    assert seen[-1] > seen[0], (seen[0], seen[-1])  # turns given during the pass


def test_a_partition_whose_position_did_not_move_reuses_its_fields(tmp_path: Path) -> None:
    """A round trip builds a partition's fetch fields only when its position moved (issue
    26); the fetch session then leaves the unchanged ones out as before."""
    fetcher = ReplicaFetcher(1, 0, MetadataCache("cluster"),
                             BrokerConfig({"log.dirs": str(tmp_path)}))
    for i in range(3):
        partition = SimpleNamespace(topic="t", index=i,
                                    log=SimpleNamespace(offline=False, log=object()),
                                    log_start_offset=0)
        fetcher.states[("t", i)] = FetchState(partition, 3, fetch_offset=7,  # type: ignore[arg-type]
                                              truncated=True)
    connection = _Connection()

    async def round_trip() -> dict[tuple[str, int], dict[str, int]]:
        with pytest.raises(_Asked):
            await fetcher._fetch_once(connection)  # type: ignore[arg-type]
        return dict(fetcher.session._pending)

    async def main() -> None:
        first = await round_trip()
        fetcher.states[("t", 1)].fetch_offset = 9  # appended
        fetcher.states[("t", 2)].partition.log_start_offset = 4  # the leader's start moved
        for i in (1, 2):  # as handling their answers marks them
            fetcher._moved(("t", i))
        second = await round_trip()
        assert second[("t", 0)] is first[("t", 0)]
        assert second[("t", 1)] == first[("t", 1)] | {"fetch_offset": 9}
        assert second[("t", 2)] == first[("t", 2)] | {"log_start_offset": 4}
        assert first[("t", 1)]["fetch_offset"] == 7  # what was sent is left as it was

    anyio.run(main)


class _Answering(_Connection):
    """Answers every fetch with an empty incremental answer in session 77."""

    async def request_fetch(self, body: dict[str, Any], logs: Any, timeout_s: float) -> Any:
        self.asked = body
        assert logs() is not None
        return SimpleNamespace(error_code=0, session_id=77, partitions=[])


def test_a_round_plans_only_the_partitions_that_moved(tmp_path: Path) -> None:
    """After the first round, a fetch round looks at the partitions whose part in the
    request may have changed (answered, truncated, delayed, added, removed), not at every
    partition followed from this leader (issue 25), and names only those that did."""
    fetcher = ReplicaFetcher(1, 0, MetadataCache("cluster"),
                             BrokerConfig({"log.dirs": str(tmp_path)}))
    looked: list[int] = []

    class _Counted:
        def __init__(self, index: int) -> None:
            self.index, self.log = index, object()

        @property
        def offline(self) -> bool:
            looked.append(self.index)
            return False

    for i in range(PARTITIONS):
        partition = SimpleNamespace(topic="t", index=i, log=_Counted(i), log_start_offset=0)
        fetcher.states[("t", i)] = FetchState(partition, 3, fetch_offset=7,  # type: ignore[arg-type]
                                              truncated=True)
    connection = _Answering()

    async def main() -> None:
        await fetcher._fetch_once(connection)  # type: ignore[arg-type]
        assert len(looked) == PARTITIONS  # the first round: every partition
        assert connection.asked["session_epoch"] == 0
        looked.clear()
        await fetcher._fetch_once(connection)  # type: ignore[arg-type]
        assert looked == []  # the old code: PARTITIONS, at every round
        assert connection.asked["session_epoch"] == 1 and connection.asked["topics"] == []
        fetcher.states[("t", 5)].fetch_offset = 9  # its answer appended two records
        fetcher._moved(("t", 5))
        fetcher.remove(("t", 8))  # followed no more
        await fetcher._fetch_once(connection)  # type: ignore[arg-type]
        assert sorted(looked) == [5]
        assert connection.asked["topics"] == [{"topic": "t", "partitions": [
            {"partition": 5, "current_leader_epoch": 3, "fetch_offset": 9,
             "log_start_offset": 0, "partition_max_bytes": fetcher._partition_max_bytes}]}]
        assert connection.asked["forgotten_topics_data"] == [{"topic": "t", "partitions": [8]}]

    anyio.run(main)
