"""Cluster-mode fixtures: a real ZooKeeper server (session scoped, shared with
tests/coordination) and TCP proxies to cut links in fault tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.proxy import Proxy
from tests.cluster.zookeeper import ZooKeeperServer, zookeeper  # noqa: F401 - fixture


@pytest.fixture
def zookeeper_proxy(zookeeper: ZooKeeperServer) -> Iterator[Proxy]:  # noqa: F811
    """A proxy in front of the test ZooKeeper: connect through `proxy.address`."""
    with Proxy((zookeeper.host, zookeeper.port)) as proxy:
        yield proxy
