"""Failover without waiting for a ZooKeeper session to expire (issue 25).

The brokers here keep Kafka's default session timeout (18 s): a killed broker's
registration outlives it for that long. The controller notices the death earlier
(the broker's listener refuses connections) and acts while the registration still
exists; the other brokers do the same for a killed controller; a restarted broker
removes the registration its previous process left. Every test counts the
producers' acknowledged records against what is read back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.scenario import (
    PARTITIONS,
    TOPIC_CONFIGS,
    assert_nothing_lost,
    start_producers,
    wait_served,
)
from tests.cluster.zookeeper import ZooKeeperServer

#: Kafka's zookeeper.session.timeout.ms default
SESSION_TIMEOUT_MS = 18000
#: Kafka's replica.lag.time.max.ms default: the leaders' own ISR shrink comes too late
#: to explain anything seen here
LAG_TIME_MAX_MS = 30000


@pytest.fixture
def slow_sessions(zookeeper: ZooKeeperServer, tmp_path: Path,
                  request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from cluster_fixture(zookeeper, tmp_path, request, overrides={
        "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
        "replica.lag.time.max.ms": LAG_TIME_MAX_MS})


def epoch_of(cluster: Cluster, broker_id: int) -> int:
    """The broker's registration's creation zxid (its broker epoch)."""
    _, stat = cluster.zk.get(f"/brokers/ids/{broker_id}")
    return int(stat.czxid)


@pytest.mark.parametrize("victim_role", ["leader", "controller"])
def test_killed_leader_is_replaced_while_its_session_lives(slow_sessions: Cluster,
                                                           victim_role: str) -> None:
    cluster = slow_sessions
    topic = "fast"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    controller = cluster.controller()
    led = {p: cluster.leader(topic, p) for p in range(PARTITIONS)}
    partition = next(p for p, b in led.items() if (b == controller) == (victim_role ==
                                                                        "controller"))
    victim = led[partition]
    old_epoch = epoch_of(cluster, victim)

    cluster.kill(victim)
    killed_at = time.monotonic()
    cluster.wait_leader_not(topic, partition, victim, WAIT_S)
    # decided while the dead broker's session (and so its registration) still lived
    assert victim in cluster.registered(), "the leader moved only once the session expired"
    if victim == controller:
        assert cluster.controller() not in (None, victim)
    # the dead broker left every ISR, so acks=all goes on with the two others
    wait_for(lambda: all(victim not in cluster.isr(topic, p) for p in range(PARTITIONS)),
             WAIT_S, f"broker {victim} out of every ISR")
    assert victim in cluster.registered()
    failover_s = wait_served(producers, partition, killed_at, bound_s=WAIT_S)
    for producer in producers:
        for p in range(PARTITIONS):
            producer.wait_acked(10, WAIT_S, partition=p)

    # back at once under a new epoch: it removed its previous process's registration
    cluster.restart(victim)
    assert epoch_of(cluster, victim) != old_epoch
    assert "registration left by its previous process" in cluster.brokers[victim].log_tail(400)
    cluster.wait_full_isr(topic, PARTITIONS)
    print(f"killed broker {victim} ({victim_role}); acknowledged again after {failover_s:.1f}s,"
          f" restarted and back in every ISR {time.monotonic() - killed_at:.1f}s after the kill")
    assert_nothing_lost(cluster, topic, producers)


def test_killed_follower_leaves_the_isr_while_acks_all_goes_on(slow_sessions: Cluster) -> None:
    cluster = slow_sessions
    topic = "follower"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    controller = cluster.controller()
    # a broker that is neither controller nor leader of partition 0: a follower there
    victim = next(b for b in cluster.brokers if b not in (controller, cluster.leader(topic, 0)))

    cluster.kill(victim)
    killed_at = time.monotonic()
    wait_for(lambda: all(victim not in cluster.isr(topic, p) for p in range(PARTITIONS)),
             WAIT_S, f"broker {victim} out of every ISR")
    assert victim in cluster.registered(), "the ISRs shrank only once the session expired"
    wait_served(producers, 0, killed_at, bound_s=WAIT_S)
    for producer in producers:
        for p in range(PARTITIONS):
            producer.wait_acked(10, WAIT_S, partition=p)
    cluster.restart(victim)
    cluster.wait_full_isr(topic, PARTITIONS)
    assert_nothing_lost(cluster, topic, producers)
