"""Cluster-mode fixtures: a real ZooKeeper server (session scoped, shared with
tests/coordination), TCP proxies to cut links in fault tests, and a 3-broker
pybroker cluster (separate processes on one ZooKeeper chroot)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.cluster import Cluster, cluster_fixture
from tests.cluster.proxy import Proxy
from tests.cluster.zookeeper import ZooKeeperServer, zookeeper  # noqa: F401 - fixture


@pytest.fixture
def zookeeper_proxy(zookeeper: ZooKeeperServer) -> Iterator[Proxy]:  # noqa: F811
    """A proxy in front of the test ZooKeeper: connect through `proxy.address`."""
    with Proxy((zookeeper.host, zookeeper.port)) as proxy:
        yield proxy


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path,  # noqa: F811
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers (ids 1-3) on a fresh chroot, each reaching ZooKeeper directly."""
    yield from cluster_fixture(zookeeper, tmp_path, request)


@pytest.fixture
def proxied_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,  # noqa: F811
                    request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers, each reaching ZooKeeper through its own proxy (cluster.proxies)."""
    yield from cluster_fixture(zookeeper, tmp_path, request, proxied=True)
