"""A TCP proxy that records every request a client sends: (api key, api version, frame
size). Start the broker with `advertised.listeners` naming the proxy, so the client
reaches the broker only through it (its bootstrap and every later connection).

    proxy = RecordingProxy(listen_port).start()
    broker = broker_factory(advertised_listeners=f"PLAINTEXT://127.0.0.1:{listen_port}")
    proxy.target = ("127.0.0.1", broker.port)
    ... proxy.requests -> [(api_key, api_version, size), ...]

It also pairs each request with its response (by correlation id, per connection):
``proxy.exchanges()`` -> [Exchange(api_key, api_version, request, response), ...], the
frames without their size prefix, for tests that read what the broker answered.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading

CHUNK_BYTES = 65536


@dataclasses.dataclass(frozen=True)
class Exchange:
    api_key: int
    api_version: int
    request: bytes
    response: bytes


def _frames(buf: bytearray) -> list[bytes]:
    """Take the complete frames (without size prefix) off the front of buf."""
    out = []
    while len(buf) >= 4:
        (size,) = struct.unpack_from(">i", buf)
        if len(buf) < 4 + size:
            break
        out.append(bytes(buf[4:4 + size]))
        del buf[:4 + size]
    return out


class RecordingProxy:
    def __init__(self, port: int) -> None:
        self.port = port
        self.target: tuple[str, int] | None = None
        self.requests: list[tuple[int, int, int]] = []
        self._exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", port))
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> RecordingProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def snapshot(self) -> list[tuple[int, int, int]]:
        with self._lock:
            return list(self.requests)

    def exchanges(self) -> list[Exchange]:
        with self._lock:
            return list(self._exchanges)

    def close(self) -> None:
        self._closed.set()
        self._server.close()
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            assert self.target is not None, "set proxy.target before clients connect"
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self._sockets += [client, upstream]
            #: this connection's requests awaiting their response, by correlation id
            pending: dict[int, tuple[int, int, bytes]] = {}
            threading.Thread(target=self._requests, args=(client, upstream, pending),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pending),
                             daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket,
                  pending: dict[int, tuple[int, int, bytes]]) -> None:
        """Client -> broker, frame by frame, noting each request's header."""
        buf = bytearray()
        try:
            while True:
                data = src.recv(CHUNK_BYTES)
                if not data:
                    break
                buf += data
                for frame in _frames(buf):
                    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
                    with self._lock:
                        self.requests.append((api_key, api_version, len(frame)))
                        pending[correlation_id] = (api_key, api_version, frame)
                    dst.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _pump(self, src: socket.socket, dst: socket.socket,
              pending: dict[int, tuple[int, int, bytes]]) -> None:
        """Broker -> client, as it comes, pairing each response with its request."""
        buf = bytearray()
        try:
            while True:
                data = src.recv(CHUNK_BYTES)
                if not data:
                    break
                buf += data
                for frame in _frames(buf):
                    (correlation_id,) = struct.unpack_from(">i", frame)
                    with self._lock:
                        asked = pending.pop(correlation_id, None)
                        if asked is not None:
                            self._exchanges.append(Exchange(*asked, frame))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
