"""One client connection: size-prefixed frames in, responses out in order.

Like Kafka's SocketServer, a connection handles one request at a time (the
channel is muted until the response is written), which keeps responses in
request order while clients pipeline up to five requests. Sockets are driven
directly (non-blocking recv_into / send / sendfile, waiting on readiness through
anyio), so record bytes read from disk go to the socket by sendfile and never
pass through Python."""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable, Sequence

import anyio

log = logging.getLogger(__name__)

READ_CHUNK = 65536
#: a larger request buffer is freed after use rather than kept for the next request
LARGE_BUFFER_KEEP_BYTES = 8 * 1024 * 1024
#: at most this many responses wait in the queue before it is flushed
OUT_QUEUE_MAX = 64
#: file slices up to this size are read and sent with the response header in one sendmsg
SMALL_SLICE_BYTES = 16384
#: iovecs per sendmsg (Linux IOV_MAX is 1024)
IOV_MAX = 1024


class ConnectionClosed(Exception):
    pass


class FrameTooLarge(Exception):
    pass


class Connection:
    def __init__(self, sock: socket.socket, max_request_bytes: int) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.fd = sock.fileno()
        self.max_request_bytes = max_request_bytes
        try:
            host, port = sock.getpeername()[:2]
            self.peer = f"{host}:{port}"
        except OSError:
            self.peer = "?"
        # read-ahead buffer: small requests arrive several per recv
        self._buf = bytearray(READ_CHUNK)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        # responses waiting to be sent, in order (see write)
        self._out: list[object] = []
        self._out_count = 0

    # --- reading ---
    async def _fill(self) -> None:
        """Read more bytes into the read-ahead buffer (compacting it first)."""
        if self._start == self._end:
            self._start = self._end = 0
        elif self._end == len(self._buf):
            remaining = self._end - self._start
            self._buf[:remaining] = self._buf[self._start : self._end]
            self._start, self._end = 0, remaining
        view = memoryview(self._buf)[self._end :]
        while True:
            try:
                n = self.sock.recv_into(view)
                break
            except BlockingIOError:
                await self._wait_readable()
            except (ConnectionResetError, BrokenPipeError) as exc:
                raise ConnectionClosed() from exc
        if n == 0:
            raise ConnectionClosed()
        self._end += n

    async def read_frame(self) -> memoryview:
        """The next request frame, without its 4-byte size prefix.

        The view points into this connection's buffers, so it is valid until the
        next call: requests are handled one at a time, and a handler keeps no
        reference to record bytes once the request is answered."""
        while self._end - self._start < 4:
            await self._fill()
        size = int.from_bytes(self._buf[self._start : self._start + 4], "big", signed=True)
        # checked before any allocation: a bogus size must not cost memory
        if size < 0 or size > self.max_request_bytes:
            raise FrameTooLarge(size)
        self._start += 4
        buffered = self._end - self._start
        if size <= buffered:
            frame = memoryview(self._buf)[self._start : self._start + size]
            self._start += size
            return frame
        big = self._big
        if big is None or len(big) < size:
            # reused across requests: a fresh 1 MB buffer per produce would cost page
            # faults and zeroing on every request
            big = bytearray(size)
            self._big = big if size <= LARGE_BUFFER_KEEP_BYTES else None
        view = memoryview(big)
        view[:buffered] = memoryview(self._buf)[self._start : self._end]
        self._start = self._end = 0
        frame = view[:size]
        rest = view[buffered:size]
        while rest:
            try:
                n = self.sock.recv_into(rest)
            except BlockingIOError:
                await self._wait_readable()
                continue
            except (ConnectionResetError, BrokenPipeError) as exc:
                raise ConnectionClosed() from exc
            if n == 0:
                raise ConnectionClosed()
            rest = rest[n:]
        return frame

    async def _wait_readable(self) -> None:
        """Nothing more to read now: send what is queued, then wait for the client."""
        if self._out:
            await self.flush()
        await anyio.wait_readable(self.sock)

    # --- writing ---
    async def write(self, parts: Sequence[object], *, flush: bool = True) -> None:
        """Queue a response (bytes pieces and file slices); send it now if `flush`.

        Queued responses go out together, in order, when the connection next has
        nothing to read (or the queue grows past its bound): a client that
        pipelines produce requests gets its acks in one sendmsg instead of one
        send each."""
        self._out.extend(parts)
        self._out_count += 1
        if flush or self._out_count >= OUT_QUEUE_MAX:
            await self.flush()

    async def flush(self) -> None:
        """Send every queued part: bytes and small file slices in one sendmsg,
        large file slices by sendfile(2)."""
        out, self._out, self._out_count = self._out, [], 0
        iov: list[memoryview] = []
        for part in out:
            if isinstance(part, (bytes, bytearray, memoryview)):
                iov.append(memoryview(part))
            elif part.length <= SMALL_SLICE_BYTES:  # type: ignore[attr-defined]
                # one pread + the shared sendmsg beats a sendfile syscall of its own
                iov.append(memoryview(part.read()))  # type: ignore[attr-defined]
            else:
                if iov:
                    await self._send_buffers(iov)
                    iov = []
                await self._send_slice(part)
        if iov:
            await self._send_buffers(iov)

    async def _send_buffers(self, views: list[memoryview]) -> None:
        first = 0
        while first < len(views):
            try:
                n = self.sock.sendmsg(views[first : first + IOV_MAX])
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
                continue
            except (ConnectionResetError, BrokenPipeError) as exc:
                raise ConnectionClosed() from exc
            while n:
                size = len(views[first])
                if n >= size:
                    n -= size
                    first += 1
                else:
                    views[first] = views[first][n:]
                    n = 0
            while first < len(views) and not len(views[first]):
                first += 1

    async def _send_slice(self, file_slice: object) -> None:
        length: int = file_slice.length  # type: ignore[attr-defined]
        sendfile: Callable[[int, int], int] = file_slice.sendfile  # type: ignore[attr-defined]
        sent = 0
        while sent < length:
            try:
                n = sendfile(self.fd, sent)
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
                continue
            except (ConnectionResetError, BrokenPipeError) as exc:
                raise ConnectionClosed() from exc
            if n == 0:
                # the file shrank under us (truncation); the frame size is already
                # promised, so the connection cannot continue
                raise ConnectionClosed()
            sent += n

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


async def serve_connection(
    conn: Connection, handle_frame: Callable[[Connection, memoryview], Awaitable[bool]]
) -> None:
    """Read frames and hand each to handle_frame until it returns False or the peer goes."""
    try:
        while True:
            frame = await conn.read_frame()
            if not await handle_frame(conn, frame):
                break
        await conn.flush()
    except ConnectionClosed:
        # the peer may have closed only its sending side: it still gets its answers
        with anyio.move_on_after(1):
            await _flush_quietly(conn)
    except FrameTooLarge as exc:
        log.warning("closing %s: request size %s outside [0, %d]", conn.peer, exc.args[0],
                    conn.max_request_bytes)
        with anyio.move_on_after(1):
            await _flush_quietly(conn)
    finally:
        conn.close()


async def _flush_quietly(conn: Connection) -> None:
    """Answer what was already handled before dropping a connection for bad input."""
    try:
        await conn.flush()
    except (ConnectionClosed, OSError):
        pass
