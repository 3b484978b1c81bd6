"""Fixtures for the stock-Kafka tests: the single broker comes from tests/conftest.py;
the 3-broker ZooKeeper cluster is tests/cluster's (one per test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.cluster import Cluster, cluster_fixture
from tests.cluster.zookeeper import ZooKeeperServer, zookeeper  # noqa: F401 - fixture


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path,  # noqa: F811
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers (ids 1-3) on a fresh chroot."""
    yield from cluster_fixture(zookeeper, tmp_path / "cluster", request)
