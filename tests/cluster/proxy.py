"""A TCP proxy for fault tests: forwards a loopback port to a target address, and the
test can cut the link and restore it.

    proxy = Proxy(("127.0.0.1", zk_port)).start()
    connect_to(proxy.address)          # e.g. a broker's zookeeper.connect
    proxy.cut("drop")                  # reset every connection; refuse new ones
    proxy.cut("freeze")                # stop forwarding both ways; connections stay open
                                       # and new ones are accepted but get nothing
    proxy.cut("refuse")                # reset every connection and stop listening: new
                                       # ones are refused, as by a host whose process is
                                       # gone (or a firewall that rejects)
    proxy.restore()                    # forward again (frozen connections resume)
    proxy.stall_next(1)                # the next connection is accepted and then gets
                                       # nothing, ever (the others are forwarded): a
                                       # ZooKeeper still starting (ZOOKEEPER-5051)
    proxy.close()

"drop" looks like a peer or network that resets connections (the client notices at
once); "refuse" like a port nobody listens on (a process gone); "freeze" looks like a
partition where packets vanish (the client notices only through its own timeouts),
which is what exercises session expiry.
Threads: one acceptor, two pumps per connection; all daemon threads, all stopped by
close()."""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from typing import Literal

POLL_S = 0.05
CHUNK_BYTES = 65536

Mode = Literal["drop", "freeze", "refuse"]


def _reset(sock: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0) rather than a FIN: a dropped link, not a goodbye."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _Link:
    def __init__(self, proxy: Proxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream: socket.socket | None = None
        self.closed = threading.Event()

    def run(self) -> None:
        # a frozen proxy accepts but does not even reach the target until restored
        while self.proxy.frozen and not self.closed.is_set():
            time.sleep(POLL_S)
        if self.closed.is_set():
            return
        try:
            self.upstream = socket.create_connection(self.proxy.target, timeout=5)
        except OSError:
            self.close()
            return
        self.upstream.settimeout(None)
        threading.Thread(target=self._pump, args=(self.upstream, self.client), daemon=True,
                         name="proxy-pump-down").start()
        self._pump(self.client, self.upstream)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self.closed.is_set():
                if self.proxy.frozen:
                    time.sleep(POLL_S)  # leave the bytes in the kernel: a black hole
                    continue
                readable, _, _ = select.select([src], [], [], POLL_S)
                if not readable or self.proxy.frozen:
                    continue
                data = src.recv(CHUNK_BYTES)
                if not data:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return
                dst.sendall(data)
        except (OSError, ValueError):
            self.close()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        _reset(self.client)
        if self.upstream is not None:
            _reset(self.upstream)


class Proxy:
    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = target
        self._listener = self._listen(host, port)
        self.host, self.port = self._listener.getsockname()[:2]
        self.mode: Mode | None = None
        self._links: list[_Link] = []
        #: accepted and never answered (stall_next), closed by close()
        self._stalled: list[socket.socket] = []
        self._stall_next = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, args=(self._listener,),
                                        daemon=True, name="proxy-accept")

    @staticmethod
    def _listen(host: str, port: int) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(64)
        return listener

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def frozen(self) -> bool:
        return self.mode == "freeze"

    @property
    def connections(self) -> int:
        with self._lock:
            return sum(1 for link in self._links if not link.closed.is_set())

    def start(self) -> Proxy:
        self._thread.start()
        return self

    def cut(self, mode: Mode = "drop") -> None:
        """Cut the link. "drop": reset every connection and every new one; "freeze":
        forward nothing either way, keep connections open; "refuse": reset every
        connection and stop listening, so that new ones are refused."""
        self.mode = mode
        if mode == "refuse":
            self._listener.close()
            self._thread.join(5)
        if mode in ("drop", "refuse"):
            with self._lock:
                links, self._links = self._links, []
            for link in links:
                link.close()

    def stall_next(self, count: int = 1) -> None:
        """The next `count` connections are accepted and then neither read, answered nor
        closed until close()."""
        with self._lock:
            self._stall_next = count

    @property
    def stalled(self) -> int:
        with self._lock:
            return len(self._stalled)

    def restore(self) -> None:
        if self.mode == "refuse":
            self._listener = self._listen(self.host, self.port)
            self._thread = threading.Thread(target=self._accept_loop, args=(self._listener,),
                                            daemon=True, name="proxy-accept")
            self._thread.start()
        self.mode = None

    def close(self) -> None:
        self._stopped.set()
        self.mode = "drop"
        _reset(self._listener)
        self._thread.join(5)
        with self._lock:
            links, self._links = self._links, []
            stalled, self._stalled = self._stalled, []
        for link in links:
            link.close()
        for sock in stalled:
            _reset(sock)

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopped.is_set():
            try:
                readable, _, _ = select.select([listener], [], [], POLL_S)
                if not readable:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):
                return
            if self.mode == "drop":
                _reset(client)
                continue
            with self._lock:
                if self._stall_next > 0:
                    self._stall_next -= 1
                    self._stalled.append(client)
                    continue
            link = _Link(self, client)
            with self._lock:
                self._links = [x for x in self._links if not x.closed.is_set()]
                self._links.append(link)
            threading.Thread(target=link.run, daemon=True, name="proxy-link").start()
