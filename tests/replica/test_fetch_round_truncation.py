"""A fetch round looks for partitions still to truncate by leader epoch only when there
are some (issue 26): the pass over every followed partition was per round trip, for a
state change that happens once per leader epoch. Every way a partition comes to need a
truncation (it joins, a newer epoch replaces it, its append met an unexpected offset)
still leads to its OffsetForLeaderEpoch."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from pybroker import _core
from pybroker.config import BrokerConfig
from pybroker.metadata.cache import MetadataCache
from pybroker.replica.fetcher import ReplicaFetcher


class _Asked(Exception):
    pass


class _Connection:
    """Records the OffsetForLeaderEpoch asked and fails it: the test is about asking."""

    timeout_s = 30.0

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.asked.append(body)
        raise _Asked


class _CountingStates(dict):  # type: ignore[type-arg]
    """The fetcher's states, counting the passes over them."""

    passes = 0

    def values(self):  # type: ignore[no-untyped-def]
        self.passes += 1
        return super().values()


def _partition(index: int, epoch: int = 3) -> SimpleNamespace:
    return SimpleNamespace(topic="t", index=index, leader_epoch=epoch, log_end_offset=7,
                           log=SimpleNamespace(log=SimpleNamespace(latest_epoch=epoch)))


def _asked_partitions(connection: _Connection) -> list[int]:
    (body,) = connection.asked
    connection.asked.clear()
    return [p["partition"] for topic in body["topics"] for p in topic["partitions"]]


def test_truncation_is_looked_for_only_when_needed(tmp_path: Path) -> None:
    fetcher = ReplicaFetcher(1, 0, MetadataCache("cluster"),
                             BrokerConfig({"log.dirs": str(tmp_path)}))
    states = fetcher.states = _CountingStates()
    connection = _Connection()

    async def truncate_new() -> None:
        with pytest.raises(_Asked):
            await fetcher._truncate_new(connection)  # type: ignore[arg-type]

    async def main() -> None:
        for i in range(3):
            fetcher.add(_partition(i))  # type: ignore[arg-type]
        await truncate_new()
        assert _asked_partitions(connection) == [0, 1, 2]
        for state in list(states.values()):
            fetcher._truncated(state)
        states.passes = 0
        # every partition truncated: a round trip's usual case, no pass and no request
        for _ in range(10):
            await fetcher._truncate_new(connection)  # type: ignore[arg-type]
        assert states.passes == 0 and connection.asked == []
        # a newer leader epoch replaces a state: asked for again
        fetcher.add(_partition(1, epoch=4))  # type: ignore[arg-type]
        await truncate_new()
        assert _asked_partitions(connection) == [1]
        fetcher._truncated(states[("t", 1)])
        # an append that met an unexpected offset: truncated again
        answer = SimpleNamespace(error_code=0, error=_core.UnexpectedAppendOffsetError("x"))
        assert fetcher._apply(states[("t", 2)], answer)  # type: ignore[arg-type]
        await truncate_new()
        assert _asked_partitions(connection) == [2]
        fetcher._truncated(states[("t", 2)])
        # an old state's truncation does not take the key of the state that replaced it
        old = states[("t", 0)]
        fetcher.add(_partition(0, epoch=5))  # type: ignore[arg-type]
        fetcher._truncated(old)
        await truncate_new()
        assert _asked_partitions(connection) == [0]

    anyio.run(main)
