"""num.replica.fetchers (Kafka's fetcher threads per source broker): a leader's followed
partitions are spread over that many fetchers, each with its own connection, session and
fetch in flight, by Kafka's rule (AbstractFetcherManager.getFetcherId); a change of the
setting moves every followed partition to its fetcher under the new count."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio

from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.log.manager import LogManager
from pybroker.metadata.cache import MetadataCache
from pybroker.purgatory import Purgatory
from pybroker.replica.fetcher import ReplicaFetcherManager, fetcher_id, java_string_hash
from pybroker.replica.manager import ReplicaManager


def test_java_string_hash_and_kafkas_fetcher_id_rule() -> None:
    # String.hashCode values any JVM gives; a surrogate pair counts as two code units
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # wraps to Integer.MIN
    # abs(31 * hash + partition) in 32-bit arithmetic, mod the count
    wrapped = (31 * 99162322 + 5) - (1 << 32)  # 3074031987 overflows an int
    assert fetcher_id("hello", 5, 7) == abs(wrapped) % 7
    assert fetcher_id("hello", 5, 1) == 0


def test_partitions_spread_over_the_fetchers_and_move_when_the_count_changes(
        tmp_path: Path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path), "num.replica.fetchers": "3"})
    logs = LogManager(config, "cluster")
    logs.startup()
    fetchers = ReplicaFetcherManager(0, MetadataCache("cluster"), config)
    replicas = ReplicaManager(0, logs, Purgatory(), fetchers)
    # broker 1 leads twelve partitions this broker follows
    record = TopicRecord("events", uuid.uuid4(), [
        PartitionState(leader=1, leader_epoch=3, replicas=[0, 1], isr=[0, 1])
        for _ in range(12)], {})

    def placement() -> dict[tuple[int, int], set[int]]:
        return {key: {index for _, index in fetcher.states}
                for key, fetcher in fetchers.fetchers.items() if fetcher.states}

    async def main() -> None:
        await replicas.apply_topic_async(record)
        expected: dict[tuple[int, int], set[int]] = {}
        for index in range(12):
            expected.setdefault((1, fetcher_id("events", index, 3)), set()).add(index)
        assert len(expected) > 1  # the rule spreads these twelve
        assert placement() == expected
        for key, fetcher in fetchers.fetchers.items():
            assert (fetcher.leader_id, fetcher.fetcher_id) == key

        config.set_dynamic({}, {"num.replica.fetchers": "1"})
        fetchers.resize()
        assert placement() == {(1, 0): set(range(12))}
        # moved: each truncates by leader epoch again before it fetches
        assert not any(s.truncated for s in fetchers.fetchers[(1, 0)].states.values())

    anyio.run(main)
    logs.shutdown()
