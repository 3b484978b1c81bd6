"""kazoo's socket I/O made cheap per message (coordination/zkio.py, issue 25): a burst of
ZooKeeper notifications is taken in with a buffered read, not three select() calls and
two recv()s per message. Counted at the client's handler against a real ZooKeeper."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from kazoo.protocol.serialization import SetData

from pybroker.coordination.zkio import PollSelect, ReadBuffer
from pybroker.coordination.zookeeper import ZooKeeperBackend
from tests.coordination.conftest import Cluster

pytestmark = pytest.mark.anyio

WATCHED = 1000


class _Connection:
    """What ReadBuffer needs of kazoo's ConnectionHandler: its socket and error wrapper."""

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock

    def _read(self, length: int, timeout: float) -> bytes:
        raise AssertionError("replaced by the buffer")

    def _socket_error_handling(self) -> Any:
        import contextlib
        return contextlib.nullcontext()


class _Client:
    def __init__(self, sock: socket.socket) -> None:
        self._connection = _Connection(sock)


def test_reads_are_served_from_one_recv_and_a_new_socket_starts_empty() -> None:
    handler = PollSelect()
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    try:
        a.setblocking(False)
        client = _Client(a)
        reader = ReadBuffer.install(client, handler)
        assert reader is not None
        b.sendall(b"\x00\x00\x00\x03abc" b"\x00\x00\x00\x02de")
        read = client._connection._read
        assert read(4, 1.0) == b"\x00\x00\x00\x03"
        # the rest arrived with the first recv: the socket counts as readable without
        # any byte left in the kernel
        assert handler.select([a], [], [], 0)[0] == [a]
        assert read(3, 1.0) == b"abc"
        assert read(4, 1.0) + read(2, 1.0) == b"\x00\x00\x00\x02de"
        assert handler.select([a], [], [], 0)[0] == []
        # a reconnect: the old connection's leftovers are not served on the new one
        b.sendall(b"old")
        assert read(1, 1.0) == b"o"
        c.setblocking(False)
        client._connection._socket = c
        d.sendall(b"new")
        assert read(3, 1.0) == b"new"
    finally:
        for s in (a, b, c, d):
            s.close()


async def test_a_burst_of_notifications_costs_few_selects(zk_cluster: Cluster) -> None:
    watcher, writer = await zk_cluster.client(), await zk_cluster.client()
    assert isinstance(watcher, ZooKeeperBackend) and isinstance(writer, ZooKeeperBackend)
    paths = [f"/burst/{i}" for i in range(WATCHED)]
    await writer.zk.call("ensure_path", "/burst")
    txn = writer.zk.kazoo.transaction()
    for path in paths:
        txn.create(path, b"0")
    await writer.zk.commit(txn)
    fired = threading.Semaphore(0)
    for path in paths:
        await watcher.zk.call("get", path, watch=lambda event: fired.release())

    kazoo = watcher.zk.kazoo
    handler = kazoo.handler
    calls = [0]
    select = handler.select

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return select(*args, **kwargs)

    handler.select = counted
    # every watched znode changes in one multi: WATCHED notifications in one burst
    txn = writer.zk.kazoo.transaction()
    chroot = writer.zk.kazoo.chroot or ""
    txn.operations.extend(SetData(chroot + p, b"1", -1) for p in paths)
    await writer.zk.commit(txn)
    for _ in range(WATCHED):
        assert fired.acquire(timeout=20), "a notification did not arrive"
    # kazoo's own reads: three selects a message (the loop's, then one before each of
    # the length's and the body's recv). Buffered: the loop's one, at most
    assert calls[0] <= WATCHED * 1.2, calls[0]
