"""Replication over a secured inter-broker listener: two brokers whose followers
fetch over SASL_SSL (PLAIN, the credentials of the listener's JAAS line) join the
ISR and copy the records; clients keep using the PLAINTEXT listener."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.cluster.cluster import Cluster, cluster_fixture, wait_for
from tests.cluster.zookeeper import ZooKeeperServer
from tests.conftest import free_port
from tests.security.certs import KEY_PASSWORD, make_pki

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="broker" password="broker-pw" user_broker="broker-pw";')


@pytest.fixture
def secured_cluster(zookeeper: ZooKeeperServer, tmp_path: Path, request: Any
                    ) -> Iterator[Cluster]:
    pki = make_pki(tmp_path / "pki")
    overrides = {
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore),
        "ssl.key.password": KEY_PASSWORD, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
    }
    original = Cluster.__init__

    def init(self: Cluster, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        for broker in self.brokers.values():
            broker.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{broker.port},"
                                             f"INTERNAL://127.0.0.1:{free_port()}")

    Cluster.__init__ = init  # type: ignore[method-assign]
    try:
        gen = cluster_fixture(zookeeper, tmp_path / "cluster", request, size=2,
                              overrides=overrides)
        cluster = next(gen)
    finally:
        Cluster.__init__ = original  # type: ignore[method-assign]
    yield cluster
    next(gen, None)


def test_followers_replicate_over_sasl_ssl(secured_cluster: Cluster) -> None:
    cluster = secured_cluster
    cluster.create_topic("replicated", 2, replication=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce("replicated", key=str(i).encode(), value=b"v%d" % i)
    assert producer.flush(30) == 0
    cluster.wait_full_isr("replicated", 2)
    for partition in range(2):
        leader = cluster.leader("replicated", partition)
        follower = next(b for b in cluster.brokers if b != leader)
        wait_for(lambda f=follower, p=partition, ld=leader: cluster.log_bytes(
            f, "replicated", p) == cluster.log_bytes(ld, "replicated", p),
            what="the follower's log equal to the leader's")
