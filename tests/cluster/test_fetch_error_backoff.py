"""A followed partition the leader keeps answering with an error is asked for about once
per replica.fetch.backoff.ms, while the leader's other partitions go on replicating
(Kafka's delayPartitions, issue 26).

The follower asked for an erroring partition again in every fetch that followed one where
another partition made progress: under a busy producer, once per round, each answered at
once with the same error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.one_fetch_session import fetches, hosts, topics_in_one_fetch_session
from tests.cluster.zookeeper import ZooKeeperServer

#: how long the erroring partition is watched while another one replicates
WINDOW_S = 4.0
#: replica.fetch.backoff.ms, Kafka's default
BACKOFF_S = 1.0
#: asks for the erroring partition the window may hold: about WINDOW_S / BACKOFF_S, with
#: room for a slow machine's rounds; the old code asked once per round, hundreds
MAX_ASKS = int(WINDOW_S / BACKOFF_S) * 2 + 2
#: a produce to the replicating partition this often (acks=all: each waits for the follower)
PRODUCE_EVERY_S = 0.005


@pytest.fixture
def metered_proxied_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
                            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    # the follower's ZooKeeper link is frozen for a while: its session must outlive that
    yield from cluster_fixture(zookeeper, tmp_path, request, proxied=True, metrics=True,
                               overrides={"zookeeper.session.timeout.ms": "30000",
                                          "replica.fetch.backoff.ms": str(int(BACKOFF_S * 1000))})


def answered(cluster: Cluster, broker_id: int, error: str) -> float:
    """Partitions `broker_id` answered with `error` in Fetch responses so far."""
    return cluster.metrics(broker_id).get(
        f'pybroker_fetch_partition_errors_total{{error="{error}"}}', 0.0)




def test_an_erroring_partition_is_delayed_while_others_replicate(
        metered_proxied_cluster: Cluster) -> None:
    cluster = metered_proxied_cluster
    leader, follower, third = topics_in_one_fetch_session(cluster, ("gone", "busy"))
    # the deletion is asked of the leader: the follower's store link is frozen meanwhile,
    # and every broker names itself as the controller (a client bootstrapped on the
    # whole cluster may ask the follower)
    admin = AdminClient({"bootstrap.servers": cluster.brokers[leader].bootstrap})
    failures: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 0})
    producer.produce("busy", b"before", on_delivery=delivered)
    assert producer.flush(WAIT_S) == 0

    # the follower does not hear of the deletion: it keeps following gone-0, which the
    # leader answers UNKNOWN_TOPIC_OR_PARTITION
    cluster.proxies[follower].cut("freeze")
    try:
        admin.delete_topics(["gone"], request_timeout=WAIT_S)["gone"].result(WAIT_S)
        wait_for(lambda: not hosts(cluster, leader, "gone") and not hosts(cluster, third, "gone"),
                 what="the leader and the third broker to drop gone-0")
        wait_for(lambda: answered(cluster, leader, "UNKNOWN_TOPIC_OR_PARTITION") > 0,
                 what="the leader to answer the follower's gone-0 with its error")
        asks, rounds = answered(cluster, leader, "UNKNOWN_TOPIC_OR_PARTITION"), \
            fetches(cluster, leader)
        # the workload of the window: acks=all produces, each fetched by the follower
        produced = 0
        end = time.monotonic() + WINDOW_S
        while time.monotonic() < end:
            producer.produce("busy", b"%d" % produced, on_delivery=delivered)
            produced += 1
            producer.poll(PRODUCE_EVERY_S)
        assert producer.flush(WAIT_S) == 0
        asks = answered(cluster, leader, "UNKNOWN_TOPIC_OR_PARTITION") - asks
        rounds = fetches(cluster, leader) - rounds
    finally:
        cluster.proxies[follower].restore()
    assert not failures, failures
    # busy-0 replicated all along: the follower fetched many times in the window
    assert rounds > 4 * MAX_ASKS, f"only {rounds:.0f} fetches reached broker {leader}"
    assert asks <= MAX_ASKS, (
        f"gone-0 was asked for {asks:.0f} times in {WINDOW_S} s of {rounds:.0f} fetches: "
        "an erroring partition is not delayed by replica.fetch.backoff.ms")
    # ... and still asked for again once its delay is over
    assert asks >= 1, "gone-0 was never asked for again after its error"
    wait_for(lambda: not hosts(cluster, follower, "gone"),
             what="the follower to hear of the deletion and drop gone-0")
