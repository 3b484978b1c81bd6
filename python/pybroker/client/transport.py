"""The byte transport under a BrokerConnection: send bytes, receive into the
caller's buffer.

A plaintext connection is a non-blocking socket the connection reads itself:
`recv_into` puts the bytes of a Fetch answer straight into the connection's
receive buffer, with no chunk objects in between (the event loop's stream
transport reads into its own buffer and hands over a new bytes object per read,
a copy of every byte, which was a sixth of a follower's CPU). A TLS connection
keeps anyio's stream (the TLS layer makes its own chunks) and copies each chunk
into the caller's buffer.

While the rest of a large frame is awaited, a plaintext socket's SO_RCVLOWAT asks the
kernel to wake the reader only once that much has arrived (at most LOWAT_MAX_BYTES):
a follower's megabyte Fetch answer comes over loopback in pieces of about 100 KB (the
leader's sendfile stops at its full send buffer), and each piece woke the fetcher for a
loop turn and a recv of its own (issue 26). The frame is no use before its last byte,
so waiting for more of it delays nothing."""

from __future__ import annotations

import os
import socket
import ssl
from typing import Protocol

import anyio
import anyio.abc

from pybroker.net.readiness import ReadinessWaiter

#: a receive of at least this many bytes waits for them all (up to LOWAT_MAX_BYTES) in one
#: wake-up; smaller ones take whatever has arrived (the low-water mark back at 1 byte)
LOWAT_MIN_BYTES = 64 << 10
#: the most one wake-up waits for: the kernel grows the receive buffer to hold the mark
#: (tcp_set_rcvlowat; it caps the mark at half of net.ipv4.tcp_rmem's maximum)
LOWAT_MAX_BYTES = 1 << 20


class Transport(Protocol):
    async def send(self, data: bytes) -> None: ...

    async def receive_into(self, view: memoryview, need: int | None = None, *,
                           wait_first: bool = False) -> int:
        """Receive at least one byte into `view`, at most len(view); how many. `need`
        (default len(view)) is how many the caller cannot do without: the wake-up may
        wait for that many, never for more. `wait_first`: the caller has just sent a
        request, so its answer is not there yet; wait for it before the first read.
        anyio.EndOfStream when the peer closed."""
        ...

    async def aclose(self) -> None: ...


async def connect(host: str, port: int, ssl_context: ssl.SSLContext | None) -> Transport:
    if ssl_context is not None:
        stream = await anyio.connect_tcp(host, port, ssl_context=ssl_context,
                                         tls_standard_compatible=False)
        return StreamTransport(stream)
    return await SocketTransport.connect(host, port)


class SocketTransport:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._readable = ReadinessWaiter(sock.fileno())
        #: the socket's SO_RCVLOWAT as last set (1: the kernel's default)
        self._lowat = 1

    @classmethod
    async def connect(cls, host: str, port: int) -> SocketTransport:
        failures: list[OSError] = []
        for family, kind, proto, _, address in await anyio.getaddrinfo(
                host, port, type=socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    sock.connect(address)
                except BlockingIOError:
                    await anyio.wait_writable(sock)
                    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if error:
                        raise OSError(error, os.strerror(error)) from None
                return cls(sock)
            except OSError as exc:
                failures.append(exc)
                sock.close()
            except BaseException:
                sock.close()  # cancelled (timeout): no socket left behind
                raise
        raise failures[0] if failures else OSError(f"no address for {host}:{port}")

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self._sock.send(view):]
            except BlockingIOError:
                await anyio.wait_writable(self._sock)

    async def receive_into(self, view: memoryview, need: int | None = None, *,
                           wait_first: bool = False) -> int:
        """As Transport's: the kernel may hold the wake-up until `need` bytes (the rest
        of a frame) are there. With `wait_first` the read that would fail (EAGAIN, and
        its BlockingIOError) is not made: a follower's every round trip made one right
        after its request went out (issue 26). The loop's readiness is level-triggered:
        an answer already there wakes the wait at once."""
        if wait_first:
            self._set_lowat(len(view) if need is None else need)
            await self._readable.wait()
        while True:
            try:
                count = self._sock.recv_into(view)
            except BlockingIOError:
                self._set_lowat(len(view) if need is None else need)
                await self._readable.wait()
                continue
            if count == 0:
                raise anyio.EndOfStream
            return count

    def fileno(self) -> int:
        return self._sock.fileno()

    async def wait_readable(self, need: int) -> None:
        """Until the socket is readable, the wake-up held (SO_RCVLOWAT) until `need`
        bytes are there where that is worth it: for a caller that reads the socket
        itself (the replica fetcher's Rust receive, _core.FetchChannel)."""
        self._set_lowat(need)
        await self._readable.wait()

    def _set_lowat(self, wanted: int) -> None:
        """Before a wait for `wanted` more bytes: a mark above them would wait for bytes
        that may never come, so it comes down; below LOWAT_MIN_BYTES it is 1 again; a
        large rest raises it once (a mark at or below the rest is kept, so a frame costs
        two setsockopt calls however many pieces it comes in)."""
        lowat = min(wanted, LOWAT_MAX_BYTES) if wanted >= LOWAT_MIN_BYTES else 1
        if lowat > self._lowat and self._lowat > 1:
            return
        if lowat != self._lowat:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, lowat)
            self._lowat = lowat

    async def aclose(self) -> None:
        # before the fd is closed (and maybe reused); a receive still waiting fails
        self._readable.fail(anyio.ClosedResourceError())
        anyio.notify_closing(self._sock)
        self._sock.close()


class StreamTransport:
    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        #: the rest of the last chunk received, not yet asked for
        self._pending = memoryview(b"")

    async def send(self, data: bytes) -> None:
        await self._stream.send(data)

    async def receive_into(self, view: memoryview, need: int | None = None, *,
                           wait_first: bool = False) -> int:
        if not self._pending:
            self._pending = memoryview(await self._stream.receive())
        count = min(len(view), len(self._pending))
        view[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count

    async def aclose(self) -> None:
        self._pending = memoryview(b"")
        await self._stream.aclose()
