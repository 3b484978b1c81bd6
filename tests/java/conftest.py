"""Fixtures for the stock-Kafka tests: the single pybroker comes from tests/conftest.py;
the 3-broker ZooKeeper cluster is tests/cluster's (one per test); a stock Kafka KRaft
cluster (a peer for MirrorMaker 2) comes from $KAFKA_HOME (one or more per test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cluster.cluster import Cluster, cluster_fixture
from tests.cluster.zookeeper import ZooKeeperServer, zookeeper  # noqa: F401 - fixture
from tests.java.stock_kafka import KafkaCluster, KafkaUnavailable, start_kafka_cluster

StockKafkaFactory = Callable[..., KafkaCluster]


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path,  # noqa: F811
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers (ids 1-3) on a fresh chroot."""
    yield from cluster_fixture(zookeeper, tmp_path / "cluster", request)


@pytest.fixture
def stock_kafka_factory(tmp_path: Path) -> Iterator[StockKafkaFactory]:
    """``stock_kafka_factory(nodes=1)`` starts a stock Kafka KRaft cluster from $KAFKA_HOME
    (skips the test when the distribution cannot run a broker); all stopped at teardown."""
    started: list[KafkaCluster] = []

    def factory(nodes: int = 1, overrides: dict[str, object] | None = None) -> KafkaCluster:
        try:
            cluster = start_kafka_cluster(tmp_path / f"stock-kafka{len(started)}", nodes,
                                          overrides)
        except KafkaUnavailable as exc:
            pytest.skip(str(exc))
        started.append(cluster)
        return cluster

    yield factory
    for cluster in started:
        cluster.stop()
