"""Rack awareness on a live cluster: brokers 1 and 2 on rack "a", broker 3 on rack "b".

- topic creation spreads every partition's replicas across both racks (the plain
  rule would put partition 0 on brokers 1 and 2, both rack a);
- KIP-392: with replica.selector.class=RackAwareReplicaSelector a confluent-kafka
  consumer with client.rack=b reads partition 0 (leader 1, rack a) from broker 3, its
  rack's follower: broker 3's bytes-out metric counts the records and the leader's
  stays at zero."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from pybroker.config import RACK_AWARE_SELECTOR
from tests.cluster.cluster import Cluster, wait_for
from tests.cluster.zookeeper import ZooKeeperServer

RACKS = {1: "a", 2: "a", 3: "b"}
RECORDS = 50


@pytest.fixture
def rack_cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
                 request: pytest.FixtureRequest) -> Iterator[Cluster]:
    cluster = Cluster(zookeeper, tmp_path_factory.mktemp("racks"), metrics=True,
                      overrides={"replica.selector.class": RACK_AWARE_SELECTOR})
    for broker_id, rack in RACKS.items():
        cluster.brokers[broker_id].overrides["broker.rack"] = rack
    request.node._pybroker_brokers = list(cluster.brokers.values())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def bytes_out(cluster: Cluster, broker_id: int, topic: str) -> float:
    return cluster.metrics(broker_id).get(f'pybroker_topic_bytes_out_total{{topic="{topic}"}}',
                                          0.0)


def test_rack_aware_assignment_and_follower_fetching(rack_cluster: Cluster) -> None:
    cluster = rack_cluster
    cluster.create_topic("spread", 6, replication=2)
    described = cluster.describe("spread")
    assert len(described) == 6
    for partition, info in described.items():
        assert {RACKS[b] for b in info["replicas"]} == {"a", "b"}, (partition, info)
    # Metadata gives clients the racks
    brokers = cluster.admin().list_topics(timeout=10).brokers
    assert {b.id for b in brokers.values()} == set(RACKS)

    cluster.create_topic("near", 1, replication=3)
    leader = cluster.leader("near", 0)
    assert RACKS[leader] == "a"  # rack-aware order: [1, 3, 2]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce("near", value=f"record-{i}".encode(), partition=0)
    assert producer.flush(60) == 0
    cluster.wait_full_isr("near", 1)

    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": f"racks-{uuid.uuid4().hex[:8]}",
        "client.rack": "b", "enable.auto.commit": False, "fetch.wait.max.ms": 100,
    })
    try:
        consumer.assign([TopicPartition("near", 0, 0)])
        values: list[bytes] = []

        def read_all() -> bool:
            for message in consumer.consume(100, timeout=1.0):
                if message.error() is None:
                    values.append(message.value())
            return len(values) >= RECORDS
        wait_for(read_all, 60, "the consumer to read every record")
    finally:
        consumer.close()
    assert values == [f"record-{i}".encode() for i in range(RECORDS)]
    # the records came from broker 3 (rack b), none from the leader on rack a
    assert bytes_out(cluster, 3, "near") > 0
    assert bytes_out(cluster, leader, "near") == 0
    other = next(b for b in RACKS if b not in (3, leader))
    assert bytes_out(cluster, other, "near") == 0
