"""Backends under test: every test taking `cluster` runs once against the embedded
backend and once against a real ZooKeeper (its own chroot per test)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from pybroker.coordination.base import CoordinationBackend
from pybroker.coordination.embedded import EmbeddedBackend
from pybroker.coordination.zookeeper import ZooKeeperBackend
from tests.cluster.zookeeper import ZooKeeperServer, zookeeper  # noqa: F401 - fixture

#: short, so expiry tests are quick; the server's tick is 250 ms
SESSION_TIMEOUT_MS = 3000
WAIT_S = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Cluster:
    """Hands out clients of one backend's metadata: with ZooKeeper each client is its own
    session (a broker); the embedded backend is one node, so every client is that node."""

    def __init__(self, kind: str, tmp_path: Path, server: ZooKeeperServer | None) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.server = server
        self.chroot = f"/test-{uuid.uuid4().hex[:12]}"
        self._clients: list[CoordinationBackend] = []
        self._embedded: EmbeddedBackend | None = None

    @property
    def connect(self) -> str:
        assert self.server is not None
        return self.server.connect_string(self.chroot)

    async def client(self, connect: str | None = None) -> CoordinationBackend:
        if self.kind == "embedded":
            if self._embedded is None:
                self._embedded = EmbeddedBackend(self.tmp_path, broker_id=0)
                await self._embedded.start()
                self._clients.append(self._embedded)
            return self._embedded
        backend = ZooKeeperBackend(connect or self.connect, session_timeout_ms=SESSION_TIMEOUT_MS,
                                   request_timeout_ms=10000)
        await backend.start()
        self._clients.append(backend)
        return backend

    async def close(self) -> None:
        for client in reversed(self._clients):
            await client.close()
        self._clients.clear()


@pytest.fixture(params=["embedded", "zookeeper"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def cluster(backend_kind: str, tmp_path: Path,
                  request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    server = request.getfixturevalue("zookeeper") if backend_kind == "zookeeper" else None
    cluster = Cluster(backend_kind, tmp_path, server)
    try:
        yield cluster
    finally:
        await cluster.close()


@pytest.fixture
async def zk_cluster(tmp_path: Path, zookeeper: ZooKeeperServer,  # noqa: F811
                     ) -> AsyncIterator[Cluster]:
    cluster = Cluster("zookeeper", tmp_path, zookeeper)
    try:
        yield cluster
    finally:
        await cluster.close()


class MultiCounter:
    """Counts the multis (ZooKeeper transactions, opcode 14) a ZooKeeper client sends,
    at kazoo's request queue: the writes the store actually receives, whichever code
    built them."""

    MULTI = 14

    def __init__(self, client: CoordinationBackend) -> None:
        assert isinstance(client, ZooKeeperBackend)
        self.count = 0
        kazoo = client.zk.kazoo
        call = kazoo._call

        def counted(request: Any, async_object: Any) -> Any:
            if request.type == self.MULTI:
                self.count += 1
            return call(request, async_object)

        kazoo._call = counted


async def eventually(check: Callable[[], bool | Awaitable[bool]], what: str,
                     timeout_s: float = WAIT_S) -> None:
    """Poll `check` until true; fail naming `what` after `timeout_s`."""
    with anyio.move_on_after(timeout_s):
        while True:
            result = check()
            if not isinstance(result, bool):
                result = await result
            if result:
                return
            await anyio.sleep(0.02)
    pytest.fail(f"timed out after {timeout_s}s waiting for {what}")
