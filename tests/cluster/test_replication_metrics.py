"""Replication metrics (issue 12): with metrics.port set, a partition leader's
pybroker_under_replicated_partitions and the ISR change counters move when a
follower stops keeping up and when it comes back.

The follower is paused (SIGSTOP), not killed: a killed broker is taken out of
the ISRs by the controller at once (its listener refuses connections, issue 25),
which is not the leader's own shrink that pybroker_isr_shrinks_total counts (nor
Kafka's IsrShrinksPerSec); a paused one is noticed by nobody but its leaders,
after replica.lag.time.max.ms."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.scenario import PARTITIONS, TOPIC_CONFIGS, start_producers
from tests.cluster.zookeeper import ZooKeeperServer

#: the leader must drop the paused follower itself (counted as an ISR shrink) before
#: the controller does when the follower's ZooKeeper session (6 s) expires
LAG_TIME_MAX_MS = 2000


@pytest.fixture
def metered_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
                    request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from cluster_fixture(zookeeper, tmp_path, request, metrics=True,
                               overrides={"replica.lag.time.max.ms": LAG_TIME_MAX_MS})


def total(cluster: Cluster, name: str, without: int | None = None) -> float:
    """The metric summed over the running brokers (but `without`: a paused one does not
    answer)."""
    return sum(cluster.metrics(b).get(name, 0.0) for b in cluster.live() if b != without)


def test_under_replicated_and_isr_changes_follow_a_follower(metered_cluster: Cluster) -> None:
    cluster = metered_cluster
    topic = "metered"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    leader = cluster.leader(topic, 0)
    follower = next(b for b in cluster.brokers if b != leader)
    followed = [p for p in range(PARTITIONS) if cluster.leader(topic, p) != follower]
    assert cluster.metrics(leader)["pybroker_under_replicated_partitions"] == 0
    shrinks = total(cluster, "pybroker_isr_shrinks_total", without=follower)
    expands = total(cluster, "pybroker_isr_expands_total")

    cluster.pause(follower)
    try:
        # every partition it followed is under-replicated, counted by its leader (once
        # its session expires, the partition it led too, under its new leader)
        wait_for(lambda: total(cluster, "pybroker_under_replicated_partitions",
                               without=follower) >= len(followed),
                 WAIT_S, f"{len(followed)} under-replicated partitions")
        assert cluster.metrics(leader)["pybroker_under_replicated_partitions"] >= 1
        assert total(cluster, "pybroker_isr_shrinks_total", without=follower) >= shrinks + 1
        for producer in producers:
            producer.wait_acked(20, WAIT_S, partition=0)
    finally:
        cluster.resume(follower)
    cluster.wait_full_isr(topic, PARTITIONS)
    wait_for(lambda: total(cluster, "pybroker_under_replicated_partitions") == 0, WAIT_S,
             "no under-replicated partition")
    assert total(cluster, "pybroker_isr_expands_total") >= expands + len(followed)
    for producer in producers:
        producer.stop()
