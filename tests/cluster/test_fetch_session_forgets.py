"""A follower's fetch session forgets every partition it stops following (issue 26).

A partition the leader answered with an error is named again in the next fetch (its
fields re-sent); if the follower stopped following it meanwhile (the topic was deleted,
its leader moved) it still had to go into that fetch's forgotten topics. It did not: the
leader's session kept the partition, answered its error at once in every fetch, and the
follower fetched again at once, thousands of times a second, for as long as it followed
anything else from that leader (a core of each broker, and every request on the leader
queued behind them)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.one_fetch_session import fetches, hosts, topics_in_one_fetch_session
from tests.cluster.zookeeper import ZooKeeperServer

#: how long the leader's fetch count is watched once the follower settled
WINDOW_S = 3.0
#: fetches the leader may get in that window: each follower's idle fetch long-polls
#: replica.fetch.wait.max.ms (500 ms), so about 12; the bug made it thousands
MAX_FETCHES = 60


@pytest.fixture
def metered_proxied_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
                            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    # the follower's ZooKeeper link is frozen for a few seconds: its session must outlive that
    yield from cluster_fixture(zookeeper, tmp_path, request, proxied=True, metrics=True,
                               overrides={"zookeeper.session.timeout.ms": "30000"})




def test_a_partition_answered_with_an_error_then_unfollowed_is_forgotten(
        metered_proxied_cluster: Cluster) -> None:
    cluster = metered_proxied_cluster
    # the follower's ZooKeeper link is frozen while the topic is deleted: the deletion is
    # asked of the leader (every broker names itself as the controller and serves
    # DeleteTopics, so a client bootstrapped on the whole cluster may ask the follower,
    # whose store writes cannot go through meanwhile)
    leader, follower, third = topics_in_one_fetch_session(cluster, ("gone", "kept"))
    admin = AdminClient({"bootstrap.servers": cluster.brokers[leader].bootstrap})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for topic in ("gone", "kept"):
        producer.produce(topic, b"before")
    assert producer.flush(WAIT_S) == 0

    # the follower does not hear of the deletion yet: it keeps following "gone" while the
    # leader, which has deleted it, answers it UNKNOWN_TOPIC_OR_PARTITION
    cluster.proxies[follower].cut("freeze")
    try:
        admin.delete_topics(["gone"], request_timeout=WAIT_S)["gone"].result(WAIT_S)
        wait_for(lambda: not hosts(cluster, leader, "gone"), what="the leader to drop gone-0")
        # acknowledged only once the follower fetched "kept" after the deletion, in answers
        # that carried gone-0's error
        producer.produce("kept", b"after")
        assert producer.flush(WAIT_S) == 0
    finally:
        cluster.proxies[follower].restore()
    wait_for(lambda: not hosts(cluster, follower, "gone"),
             what="the follower to hear of the deletion and drop gone-0")
    # the follower still follows "kept" from the leader: its fetches name gone-0 as forgotten
    # once, then long-poll as any idle follower's
    producer.produce("kept", b"settled")
    assert producer.flush(WAIT_S) == 0
    start, before = time.monotonic(), fetches(cluster, leader)
    time.sleep(WINDOW_S)  # a rate over a window, not a wait for a condition
    count = fetches(cluster, leader) - before
    elapsed = time.monotonic() - start
    assert count <= MAX_FETCHES, (
        f"broker {leader} answered {count:.0f} fetches in {elapsed:.1f} s: a follower's "
        "session still holds the deleted partition, answered at once with its error")
    assert [v for _, v in cluster.read_partition("kept", 0)] == [b"before", b"after",
                                                                 b"settled"]
