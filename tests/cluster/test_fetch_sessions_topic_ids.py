"""Issue 14 in cluster mode: followers fetch in incremental sessions, and a topic has
one id on every broker, in ZooKeeper's topic znode and in every replica's
partition.metadata; a topic znode Kafka < 2.8 wrote (no id) gets one, once."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration.helpers import topic_id as metadata_topic_id

ZERO = uuid.UUID(int=0)


@pytest.fixture
def metered_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
                    request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from cluster_fixture(zookeeper, tmp_path, request, metrics=True)


def kafka_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def partition_metadata(cluster: Cluster, broker_id: int, topic: str, index: int) -> str:
    return (cluster.brokers[broker_id].data_dir / f"{topic}-{index}" /
            "partition.metadata").read_text()


def test_followers_fetch_in_incremental_sessions(metered_cluster: Cluster) -> None:
    cluster = metered_cluster
    cluster.create_topic("sessions", partitions=6, replication=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for round_ in range(3):
        for index in range(6):
            producer.produce("sessions", value=b"r%d" % round_, partition=index)
        assert producer.flush(WAIT_S) == 0
    # each broker leads two partitions, followed by the two others: two follower
    # sessions on each leader, and no session was ever refused or evicted
    for broker_id in cluster.brokers:
        wait_for(lambda b=broker_id: cluster.metrics(b).get(
            'pybroker_fetch_sessions{kind="follower"}', 0) >= 2,
            what=f"follower fetch sessions on broker {broker_id}")
        assert cluster.metrics(broker_id)["pybroker_fetch_session_evictions_total"] == 0
    for index in range(6):
        assert [v for _, v in cluster.read_partition("sessions", index)] == [b"r0", b"r1", b"r2"]
        wait_for(lambda i=index: len({cluster.log_bytes(b, "sessions", i)
                                      for b in cluster.brokers}) == 1,
                 what=f"every replica of partition {index} to hold the same log")


def test_topic_id_is_the_same_everywhere(cluster: Cluster) -> None:
    cluster.create_topic("ids", partitions=3, replication=3)
    ids = {b: metadata_topic_id(cluster.brokers[b].bootstrap, "ids") for b in cluster.brokers}
    (topic_id,) = set(ids.values())
    assert topic_id != ZERO
    znode = json.loads(cluster.zk.get("/brokers/topics/ids")[0])
    assert znode["topic_id"] == kafka_uuid(topic_id)
    for broker_id in cluster.brokers:
        for index in range(3):
            assert partition_metadata(cluster, broker_id, "ids", index) == \
                f"version: 0\ntopic_id: {kafka_uuid(topic_id)}\n"
    out = subprocess.run(
        [sys.executable, "-m", "pybroker", "topics", "--bootstrap-server", cluster.bootstrap,
         "--describe", "--topic", "ids"], capture_output=True, text=True, timeout=60,
        check=True).stdout
    assert f"Topic: ids\tTopicId: {kafka_uuid(topic_id)}\t" in out, out


def test_topic_znode_without_an_id_gets_one_once(cluster: Cluster) -> None:
    # as Kafka 2.7 writes it: version 2, no topic_id
    cluster.zk.create("/brokers/topics/legacy", json.dumps(
        {"version": 2, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
         "adding_replicas": {}, "removing_replicas": {}}).encode())

    def assigned() -> str | None:
        return json.loads(cluster.zk.get("/brokers/topics/legacy")[0]).get("topic_id")

    encoded = wait_for(assigned, what="the controller to give the topic an id")
    topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(encoded + "=="))
    assert topic_id != ZERO
    for broker_id in cluster.brokers:
        wait_for(lambda b=broker_id: metadata_topic_id(cluster.brokers[b].bootstrap, "legacy")
                 == topic_id, what=f"broker {broker_id} to report the new id")
        for index in range(2):
            wait_for(lambda b=broker_id, i=index: partition_metadata(cluster, b, "legacy", i)
                     == f"version: 0\ntopic_id: {encoded}\n",
                     what=f"partition.metadata of legacy-{index} on broker {broker_id}")
    # a new controller keeps it
    old = cluster.controller()
    assert old is not None
    cluster.kill(old)
    wait_for(lambda: cluster.controller() not in (None, old), what="a new controller")
    cluster.restart(old)
    assert assigned() == encoded
