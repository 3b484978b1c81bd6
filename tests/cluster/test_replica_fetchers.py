"""num.replica.fetchers=2 (Kafka's fetcher threads per source broker): a follower fetches
a leader's partitions with as many fetchers as its partitions' fetcher ids name, each with
its own connection and fetch session, and every acknowledged (acks=all) record is on
every replica, byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from pybroker.replica.fetcher import fetcher_id
from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.zookeeper import ZooKeeperServer

TOPIC = "spread"
PARTITIONS = 8
RECORDS = 2000


@pytest.fixture
def two_fetcher_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
                        request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from cluster_fixture(zookeeper, tmp_path, request,
                               metrics=True, overrides={"num.replica.fetchers": "2"})


def test_two_fetchers_per_leader_replicate_every_acknowledged_record(
        two_fetcher_cluster: Cluster) -> None:
    cluster = two_fetcher_cluster
    cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "3"})
    acked: list[int] = []
    errors: list[str] = []

    def report(err: object, message: object) -> None:
        if err is None:
            acked.append(1)
        else:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": int(WAIT_S * 1000)})
    for i in range(RECORDS):
        producer.produce(TOPIC, b"%d" % i + b"x" * 500, partition=i % PARTITIONS,
                         on_delivery=report)
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0
    assert not errors and len(acked) == RECORDS

    # acks=all with min.insync.replicas=3: every replica already holds every record
    leaders = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
    for p, leader in leaders.items():
        copy = cluster.log_bytes(leader, TOPIC, p)
        assert copy.count(b"x" * 500) == RECORDS // PARTITIONS
        for broker in cluster.brokers:
            wait_for(lambda b=broker, p=p, c=copy: cluster.log_bytes(b, TOPIC, p) == c,
                     WAIT_S, f"broker {broker}'s copy of {TOPIC}-{p}")

    # one fetch session on the leader per (follower, fetcher id) fetching from it
    spread = {leader: {fetcher_id(TOPIC, p, 2) for p, led_by in leaders.items()
                       if led_by == leader} for leader in cluster.brokers}
    # some leader's partitions need both fetchers: one fetcher per leader cannot pass
    assert any(len(ids) == 2 for ids in spread.values()), (leaders, spread)
    for leader, fetcher_ids in spread.items():
        want = (len(cluster.brokers) - 1) * len(fetcher_ids)
        wait_for(lambda b=leader, n=want:
                 cluster.metrics(b).get('pybroker_fetch_sessions{kind="follower"}') == n,
                 WAIT_S, f"{want} fetch sessions on broker {leader}")
