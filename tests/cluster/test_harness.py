"""The cluster test harness itself: the ZooKeeper fixture and the fault proxy."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.cluster.proxy import Proxy
from tests.cluster.zookeeper import ZooKeeperServer, four_letter_word

WAIT_S = 10.0


def test_zookeeper_answers_four_letter_words(zookeeper: ZooKeeperServer) -> None:
    assert four_letter_word(zookeeper.host, zookeeper.port, "ruok") == "imok"
    assert "Mode: standalone" in zookeeper.srvr()
    assert zookeeper.connect_string("/x") == f"127.0.0.1:{zookeeper.port}/x"


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    """A TCP server that echoes every byte back, one thread per connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while not stop.is_set():
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[:2]
    stop.set()
    listener.close()


def roundtrip(sock: socket.socket, payload: bytes, timeout_s: float = WAIT_S) -> bytes:
    sock.settimeout(timeout_s)
    sock.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the peer reset or closed `sock`; a silent peer fails with TimeoutError."""
    sock.settimeout(2)
    try:
        sock.sendall(b"?")
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_proxy_forwards_both_ways(echo_server: tuple[str, int]) -> None:
    with Proxy(echo_server) as proxy, socket.create_connection((proxy.host, proxy.port)) as s:
        assert roundtrip(s, b"hello") == b"hello"
        assert roundtrip(s, b"x" * 200_000) == b"x" * 200_000


def test_drop_resets_connections_and_refuses_new_ones(echo_server: tuple[str, int]) -> None:
    with Proxy(echo_server) as proxy:
        s = socket.create_connection((proxy.host, proxy.port))
        assert roundtrip(s, b"a") == b"a"
        proxy.cut("drop")
        assert closed_by_peer(s)
        s.close()
        with socket.create_connection((proxy.host, proxy.port)) as fresh:
            assert closed_by_peer(fresh)  # accepted by the kernel, then reset
        proxy.restore()
        with socket.create_connection((proxy.host, proxy.port)) as again:
            assert roundtrip(again, b"c") == b"c"


def test_freeze_holds_bytes_until_restore(echo_server: tuple[str, int]) -> None:
    with Proxy(echo_server) as proxy:
        s = socket.create_connection((proxy.host, proxy.port))
        assert roundtrip(s, b"before") == b"before"
        proxy.cut("freeze")
        s.sendall(b"during")
        late = socket.create_connection((proxy.host, proxy.port))  # accepted, not forwarded
        late.sendall(b"late")
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):
            s.recv(16)  # nothing comes back while frozen
        assert proxy.connections == 2
        proxy.restore()
        deadline = time.monotonic() + WAIT_S
        got = b""
        s.settimeout(WAIT_S)
        while got != b"during" and time.monotonic() < deadline:
            got += s.recv(16)
        assert got == b"during"  # the frozen connection resumes where it stopped
        late.settimeout(WAIT_S)
        assert late.recv(16) == b"late"
        s.close()
        late.close()
