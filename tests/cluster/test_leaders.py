"""Preferred leaders and controlled shutdown on a live cluster (issue 15): after a
broker restart, `pybroker leader-election` (and, on its own, the controller's
auto leader rebalance) moves leadership back to the preferred replicas; a rolling
restart by SIGTERM under acks=all produce loses nothing, its leaderships moved
away by ControlledShutdown before each broker stops."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.operate import tool
from tests.cluster.scenario import (
    PARTITIONS,
    TOPIC_CONFIGS,
    assert_nothing_lost,
    start_producers,
)
from tests.cluster.zookeeper import ZooKeeperServer


@pytest.fixture
def rebalancing_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
                        request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers whose controller checks leader imbalance every second."""
    yield from cluster_fixture(zookeeper, tmp_path, request, overrides={
        "leader.imbalance.check.interval.seconds": 1})


def _bounce(cluster: Cluster, topic: str, broker: int) -> None:
    """kill -9 the broker (its leaderships fail over), restart it, wait until it is
    back in every ISR: it then leads nothing."""
    cluster.kill(broker)
    cluster.wait_leader_not(topic, 0, broker)
    cluster.restart(broker)
    cluster.wait_full_isr(topic, PARTITIONS)


def test_preferred_leader_election_moves_leadership_back(cluster: Cluster,
                                                         tmp_path: Path) -> None:
    topic = "preferred"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    preferred = {p: cluster.describe(topic)[p]["replicas"][0] for p in range(PARTITIONS)}
    assert cluster.leader(topic, 0) == preferred[0]
    _bounce(cluster, topic, preferred[0])
    assert cluster.leader(topic, 0) != preferred[0]
    bootstrap = cluster.brokers[2].bootstrap

    out = tool("leader-election", "--bootstrap-server", bootstrap, "--election-type",
               "preferred", "--topic", topic, "--partition", "0")
    assert out == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0\n"
    assert cluster.leader(topic, 0) == preferred[0]
    assert cluster.isr(topic, 0) == [1, 2, 3]

    # asked again (as a JSON file, every partition): nothing to do
    partitions = tmp_path / "partitions.json"
    partitions.write_text(json.dumps({"partitions": [
        {"topic": topic, "partition": p} for p in range(PARTITIONS)]}))
    out = tool("leader-election", "--bootstrap-server", bootstrap, "--election-type",
               "PREFERRED", "--path-to-json-file", str(partitions))
    names = ", ".join(f"{topic}-{p}" for p in range(PARTITIONS))
    assert out == f"Valid replica already elected for partitions {names}\n"
    # an unclean election where the leader lives is not needed either
    out = tool("leader-election", "--bootstrap-server", bootstrap, "--election-type",
               "unclean", "--all-topic-partitions")
    assert f"Valid replica already elected for partitions {topic}-0" in out \
        or f"{topic}-0," in out, out
    # an unknown partition fails, with Kafka's exception name and a non-zero status
    out = tool("leader-election", "--bootstrap-server", bootstrap, "--election-type",
               "preferred", "--topic", topic, "--partition", "7", check=False)
    assert (f"Error completing leader election (PREFERRED) for partition: {topic}-7: "
            "org.apache.kafka.common.errors.UnknownTopicOrPartitionException") in out, out


def test_auto_leader_rebalance_moves_leadership_back(rebalancing_cluster: Cluster) -> None:
    cluster = rebalancing_cluster
    topic = "rebalanced"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    preferred = cluster.describe(topic)[0]["replicas"][0]
    cluster.kill(preferred)
    cluster.wait_leader_not(topic, 0, preferred)
    cluster.restart(preferred)
    # no tool: the controller finds broker `preferred` leading none of its partitions
    wait_for(lambda: cluster.leader(topic, 0) == preferred, WAIT_S,
             f"the auto rebalance to give {topic}-0 back to broker {preferred}")


def test_rolling_restart_under_acks_all_loses_nothing(cluster: Cluster) -> None:
    topic = "rolling"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    for broker_id in sorted(cluster.brokers):
        led = [p for p in range(PARTITIONS) if cluster.leader(topic, p) == broker_id]
        broker = cluster.brokers[broker_id]
        assert broker.stop() == 0  # SIGTERM: a controlled shutdown, then a clean stop
        log = broker.log_path.read_text()
        assert log.rstrip().endswith("shut down cleanly (pybroker.broker)")
        assert "controlled shutdown succeeded" in log.rsplit("===== start", 1)[1]
        # its leaderships went to other ISR members before it stopped
        for p in led:
            assert cluster.leader(topic, p) not in (broker_id, -1)
        for producer in producers:
            producer.wait_acked(20, WAIT_S)
        cluster.restart(broker_id)
        cluster.wait_full_isr(topic, PARTITIONS)
    for producer in producers:
        producer.wait_acked(20, WAIT_S)
    errors = {p.tag: sum(p.failed_summary().values()) for p in producers}
    totals = assert_nothing_lost(cluster, topic, producers)
    print(f"rolling restart of {len(cluster.brokers)} brokers: acknowledged {totals}, "
          f"delivery errors {errors}")
    assert errors == {p.tag: 0 for p in producers}, [p.failed for p in producers]
