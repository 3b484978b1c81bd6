"""A full collection slow enough to stall the loop freezes what survived it, so later
full collections do not walk the broker's long-lived state again (issue 25); what the
broker keeps per partition holds no reference cycle, so a deleted topic's state is
still freed once frozen (a frozen cycle would never be)."""

from __future__ import annotations

import gc
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.fetch.sessions import CachedPartition, FetchSessionCache
from pybroker.log.manager import LogManager
from pybroker.metadata.cache import MetadataCache
from pybroker.purgatory import Purgatory
from pybroker.replica.fetcher import ReplicaFetcherManager
from pybroker.replica.manager import ReplicaManager
from pybroker.server.gc_policy import PAUSES, GcPauses
from tests.fuzz.inprocess import InProcessBroker

CREATE_TOPICS, DELETE_TOPICS = 19, 20


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def _cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def no_collector_afterwards() -> Iterator[None]:
    """The test's freezes and disabling are undone for the tests after it."""
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def _until(done: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.usefixtures("no_collector_afterwards")
def test_a_slow_full_collection_freezes_its_survivors_and_not_its_garbage() -> None:
    gc.collect()
    gc.unfreeze()
    kept = Node()
    kept.other = kept
    garbage = _cycle()
    hosted = [1000]
    # every full collection is "slow"; the partitions grew by a quarter since install
    pauses = GcPauses(freeze_after_s=0.0).install(growth=lambda: hosted[0])
    hosted[0] = 1250
    try:
        gc.collect(1)  # a young collection never freezes
        assert pauses.freezes == 0 and gc.get_freeze_count() == 0
        gc.collect()
    finally:
        pauses.uninstall()
    assert pauses.freezes == 1
    assert garbage() is None  # collected, not frozen
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the survivors: this process's modules, pytest, ...
    survivor = weakref.ref(kept)
    del kept
    gc.collect()
    assert survivor() is not None  # a frozen cycle is not collected (the price)
    # nothing more frozen without the policy; the count itself may fall meanwhile, as
    # frozen objects still die by reference count (other tests' leftover threads)
    assert gc.get_freeze_count() <= frozen


@pytest.mark.usefixtures("no_collector_afterwards")
def test_a_fast_full_collection_freezes_nothing() -> None:
    gc.unfreeze()
    hosted = [0]
    pauses = GcPauses(freeze_after_s=3600.0).install(growth=lambda: hosted[0])
    hosted[0] = 10_000
    try:
        gc.collect()
    finally:
        pauses.uninstall()
    assert pauses.freezes == 0 and gc.get_freeze_count() == 0


@pytest.mark.usefixtures("no_collector_afterwards")
def test_freezes_wait_for_the_hosted_partitions_to_grow() -> None:
    """A frozen cycle is never collected (a connection open at a freeze, closed
    later): freezes are bounded by the growth of the partitions hosted, not by how
    often a full collection is slow."""
    gc.unfreeze()
    hosted = [1000]
    pauses = GcPauses(freeze_after_s=0.0).install(growth=lambda: hosted[0])
    try:
        for partitions, froze in ((1000, 0), (1249, 0), (1250, 1), (1250, 1), (1400, 1),
                                  (1563, 2), (900, 2), (1600, 2), (1954, 3)):
            hosted[0] = partitions
            gc.collect()
            assert pauses.freezes == froze, (partitions, pauses.freezes)
        hosted[0] = 0  # a new broker
        small = GcPauses(freeze_after_s=0.0).install(growth=lambda: hosted[0])
        hosted[0] += 99  # a quarter of nothing is not growth: 100 more partitions are
        gc.collect()
        assert small.freezes == 0
        hosted[0] += 1
        gc.collect()
        assert small.freezes == 1
        small.uninstall()
        unbounded = GcPauses(freeze_after_s=0.0).install()  # no growth measure: no freezes
        gc.collect()
        assert unbounded.freezes == 0
        unbounded.uninstall()
    finally:
        pauses.uninstall()


@pytest.mark.usefixtures("no_collector_afterwards")
def test_a_brokers_freeze_growth_counts_the_partition_states_it_takes(tmp_path: Path
                                                                       ) -> None:
    """Each state a broker takes is new objects (its state, the cache's entry, the
    replica's lists): a controlled shutdown or a restart renews most of them with the
    partitions hosted unchanged, so the states taken count as growth too."""
    broker = InProcessBroker(tmp_path / "data")
    try:
        growth = PAUSES.growth
        assert growth is not None
        before = growth()
        resp = broker.request(CREATE_TOPICS, 4, {"timeout_ms": 30000, "topics": [
            {"name": "grows", "num_partitions": 20, "replication_factor": 1}]})
        assert all(t["error_code"] == 0 for t in resp["topics"]), resp
        broker.wait_led(["grows"])
        # 20 partitions hosted, and their 20 first states taken
        _until(lambda: growth() - before >= 40, f"growth {growth() - before}, not 40",
               timeout=10)
    finally:
        broker.close()


@pytest.mark.usefixtures("no_collector_afterwards")
def test_a_deleted_topics_frozen_state_is_freed(tmp_path: Path) -> None:
    """A broker's own topics (log, replica state, metadata cache entry): created,
    frozen, deleted with the collector off: every object of them goes."""
    broker = InProcessBroker(tmp_path / "data")
    try:
        names = ["frozen-a", "frozen-b"]
        resp = broker.request(CREATE_TOPICS, 4, {"timeout_ms": 30000, "topics": [
            {"name": n, "num_partitions": 20, "replication_factor": 1} for n in names]})
        assert all(t["error_code"] == 0 for t in resp["topics"]), resp
        broker.wait_led(names)
        context = broker.broker.context
        assert context is not None
        refs = [weakref.ref(p) for k, p in context.replicas.partitions.items()
                if k[0] in names]
        refs += [weakref.ref(p.log) for k, p in context.replicas.partitions.items()
                 if k[0] in names]
        refs += [weakref.ref(context.metadata.topic(n)) for n in names]  # type: ignore[arg-type]
        assert len(refs) == 2 * 40 + 2
        gc.collect()
        gc.freeze()
        gc.disable()
        resp = broker.request(DELETE_TOPICS, 4, {"timeout_ms": 30000, "topic_names": names})
        assert all(t["error_code"] == 0 for t in resp["responses"]), resp
        _until(lambda: all(r() is None for r in refs),
               f"{sum(r() is not None for r in refs)} of {len(refs)} objects of the deleted "
               f"topics still alive with the collector off")
    finally:
        gc.enable()
        broker.close()


@pytest.mark.usefixtures("no_collector_afterwards")
def test_a_removed_topics_leader_and_follower_state_is_freed(tmp_path: Path) -> None:
    """What a cluster member keeps: partitions led here with followers' fetch state,
    and partitions followed (the fetcher's entry)."""
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    logs = LogManager(config, "cluster")
    logs.startup()
    replicas = ReplicaManager(0, logs, Purgatory(),
                              ReplicaFetcherManager(0, MetadataCache("cluster"), config))
    record = TopicRecord("t", uuid.uuid4(), [
        PartitionState(leader=0 if i < 4 else 1, leader_epoch=5, replicas=[0, 1, 2],
                       isr=[0, 1, 2]) for i in range(8)], {})
    anyio.run(replicas.apply_topic_async, record)
    for i in range(4):
        partition = replicas.get("t", i)
        assert partition is not None and partition.is_leader
        partition.record_follower_fetch(1, 0)
        partition.record_follower_fetch(2, 0)
    del partition
    refs = [weakref.ref(p) for p in replicas.partitions.values()]
    refs += [weakref.ref(p.log) for p in replicas.partitions.values()]
    assert len(refs) == 16
    gc.collect()
    gc.freeze()
    gc.disable()
    replicas.remove_topic("t")
    alive = [r() for r in refs if r() is not None]
    assert not alive, [type(x).__name__ for x in alive]
    logs.shutdown()


@pytest.mark.usefixtures("no_collector_afterwards")
def test_an_evicted_fetch_session_is_freed_once_frozen() -> None:
    """A follower's fetch session lives as long as the follower fetches (frozen with
    the rest); once it goes (evicted, or replaced) its partitions go too."""
    cache = FetchSessionCache(4)
    session_id = cache.maybe_create(True, False, {
        ("t", i): CachedPartition("t", uuid.UUID(int=0), i, 0, 100, -1, -1, -1)
        for i in range(50)})
    session = cache.get(session_id)
    assert session is not None
    # its partitions (slots, no weak references) refer to nothing back: the session is
    # what a cycle would keep
    refs = [weakref.ref(session)]
    gc.collect()
    gc.freeze()
    gc.disable()
    del session
    cache.remove(session_id)
    assert refs[0]() is None
