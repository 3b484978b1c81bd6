"""One client connection: size-prefixed frames in, responses out in order.

Like Kafka's SocketServer, a connection handles one request at a time, which keeps
responses in request order however many requests a client pipelines. Unlike Kafka,
it does not stop reading while a response waits for room in the send buffer: it
reads the client's bytes ahead, unhandled and bounded (see Connection._read_ahead),
so a full receive buffer cannot stall the connection. Sockets are driven
directly (non-blocking recv_into / send / sendfile, waiting on readiness through
the event loop's reader and writer callbacks), so record bytes read from disk go to
the socket by sendfile and never pass through Python.

Memory: a frame that fits the read-ahead buffer (64 KiB, borrowed from a shared
cache only while bytes are buffered) is parsed from it in place (a small last
one is copied out, so the buffer goes back while its request waits). A larger frame
gets its own buffer, an anonymous mapping that starts at LARGE_FIRST_BYTES and
doubles (mremap, no copy) as the bytes arrive, so a size prefix alone costs no
memory: what a connection holds is bounded by what it actually sent. With
`queued.max.request.bytes` set, large frames also reserve their size from the
shared pool first (see pybroker.server.memory).

Whatever goes wrong on the socket (reset, broken pipe, timeout, a peer that
closes while its request waits) ends this connection only: it surfaces as
ConnectionClosed and the connection is closed."""

from __future__ import annotations

import asyncio
import logging
import mmap
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from pybroker._core import StorageError
from pybroker.net.readiness import ReadinessWaiter, wait_either
from pybroker.server.bad_requests import RateLimitedLog
from pybroker.server.deferred import DeferredAnswers
from pybroker.server.memory import READ_BUFFER_BYTES, give_read_buffer, take_read_buffer

if TYPE_CHECKING:
    from pybroker.security.session import Session
    from pybroker.security.tls import TlsSocket
    from pybroker.server.memory import RequestMemoryPool
    from pybroker.server.registry import ConnectionRegistry

log = logging.getLogger(__name__)
#: refused requests, logged at a bounded rate (a hostile client must not fill the log)
refused = RateLimitedLog(log)

#: frames up to this size (with their 4-byte size prefix) are parsed from the read-ahead buffer
SMALL_FRAME_BYTES = READ_BUFFER_BYTES - 4
#: the last buffered frame up to this size is copied out, so the read-ahead buffer goes back
#: at once instead of staying pinned while the request is handled (a long poll may wait
#: minutes); fetch, group and metadata requests are this small, produce requests are not
COPY_FRAME_BYTES = 4096
#: a large frame's buffer starts at this size (or the frame's, if smaller) and doubles
LARGE_FIRST_BYTES = 1 << 20
#: a larger request buffer is freed after use rather than kept for the next request
LARGE_BUFFER_KEEP_BYTES = 8 * 1024 * 1024
#: at most this many responses wait in the queue before it is flushed
OUT_QUEUE_MAX = 64
#: file slices up to this size are read and sent with the response header in one sendmsg
SMALL_SLICE_BYTES = 16384
#: iovecs per sendmsg (Linux IOV_MAX is 1024)
IOV_MAX = 1024
#: request bytes a connection reads ahead (unhandled) while its responses wait for room in
#: the socket's send buffer or a request is handled; past it the connection stops reading,
#: as before (see _read_ahead). A producer pipelining one request per partition to 10,000
#: partitions has 1.4 MB in flight: at 1 MiB a broker behind on a loaded machine still
#: stopped reading, and the full receive buffer dropped segments again
READ_AHEAD_MAX_BYTES = 4 << 20
#: sendmsg flag: more follows at once (Linux); 0 where the platform has none
MSG_MORE = getattr(socket, "MSG_MORE", 0)

_WATCH_OFF, _WATCH_ON, _WATCH_SUSPENDED = 0, 1, 2


class ConnectionClosed(Exception):
    pass


class FrameTooLarge(Exception):
    pass


class Connection:
    __slots__ = (
        "sock", "fd", "max_request_bytes", "peer", "host", "pool", "registry", "scope",
        "last_active", "handling_since", "close_reason", "_buf", "_start", "_end", "_big",
        "_reserved", "_out", "_out_count", "_watch", "_loop", "session", "zero_copy",
        "_readable", "deferred", "_flushing", "_writable", "_ahead", "_ahead_end",
        "_ahead_reserved", "_small",
    )

    def __init__(self, sock: socket.socket | TlsSocket, max_request_bytes: int, *,
                 pool: RequestMemoryPool | None = None,
                 registry: ConnectionRegistry | None = None) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.fd = sock.fileno()
        self.max_request_bytes = max_request_bytes
        try:
            host, port = sock.getpeername()[:2]
            self.host = str(host)
            self.peer = f"{host}:{port}"
        except (OSError, ValueError):  # reset already, or not an IP socket
            self.host = self.peer = "?"
        self.pool = pool
        self.registry = registry
        #: the scope the connection is served in; cancelling it ends the connection
        self.scope: anyio.CancelScope | None = None
        #: monotonic time of the last bytes read or written (idle time counts from it)
        self.last_active = time.monotonic()
        #: monotonic time the request being handled arrived; 0.0 when none is
        self.handling_since = 0.0
        #: why the broker ended the connection ("idle", "peer closed"), if it did
        self.close_reason: str | None = None
        # read-ahead buffer, held only while bytes are buffered: [_start, _end) unparsed
        self._buf: mmap.mmap | None = None
        self._start = 0
        self._end = 0
        # large frames' buffer, reused across requests up to LARGE_BUFFER_KEEP_BYTES
        self._big: mmap.mmap | None = None
        # pool bytes held by the last large frame, given back when the next is read
        self._reserved = 0
        # responses waiting to be sent, in order (see write)
        self._out: list[object] = []
        self._out_count = 0
        self._watch = _WATCH_OFF
        self._loop: asyncio.AbstractEventLoop | None = None
        self._readable = ReadinessWaiter(self.fd, on_idle=self._read_ahead_idle)
        # held from a write's first wait until the queued responses are sent
        self._writable = ReadinessWaiter(self.fd, writable=True)
        #: the listener and principal (pybroker.security.session); None: PLAINTEXT
        self.session: Session | None = None
        #: file slices go by sendfile; off on TLS, where bytes must pass through OpenSSL
        self.zero_copy = True
        #: answers owed for requests already read past (acks=all produces waiting for
        #: their followers, see pybroker.server.deferred)
        self.deferred = DeferredAnswers(self)
        #: a flush is sending: it also sends what is queued meanwhile (see flush)
        self._flushing = False
        # bytes read ahead while a send waited, not yet taken by the read path (_read_ahead)
        self._ahead: bytearray | None = None
        # the peer's side ended (EOF or error) while reading ahead: once _ahead is taken,
        # the read path sees the end
        self._ahead_end = False
        # pool bytes the read-ahead bytes hold (queued.max.request.bytes)
        self._ahead_reserved = 0
        # the last request read was small: bytes arriving while it is handled are read
        # ahead (see _read_ahead_idle)
        self._small = False

    # --- reading ---
    async def read_frame(self) -> memoryview:
        """The next request frame, without its 4-byte size prefix.

        The view points into this connection's buffers, so it is valid until the
        next call: requests are handled one at a time, and a handler keeps no
        reference to request bytes once the request is answered."""
        if self._reserved:
            self._release_reservation()
        while self._end - self._start < 4:
            await self._fill(4)
        buf = self._buf
        assert buf is not None
        start = self._start
        size = int.from_bytes(buf[start : start + 4], "big", signed=True)
        # checked before any allocation: a bogus size must not cost memory
        if size < 0 or size > self.max_request_bytes:
            raise FrameTooLarge(size)
        self._small = size <= COPY_FRAME_BYTES
        if size > SMALL_FRAME_BYTES:
            self._start = start + 4
            return await self._read_large(size)
        while self._end - self._start < size + 4:
            await self._fill(size + 4)
        buf = self._buf
        assert buf is not None
        start = self._start + 4
        end = self._start = start + size
        if end == self._end and size <= COPY_FRAME_BYTES:
            self._buf = None
            self._start = self._end = 0
            frame = buf[start:end]
            give_read_buffer(buf)
            return memoryview(frame)
        return memoryview(buf)[start:end]

    async def _fill(self, need: int) -> None:
        """Read more bytes into the read-ahead buffer, with room for `need` bytes
        from _start. With nothing buffered the buffer goes back to the shared
        cache while the connection waits, so an idle connection holds none."""
        buf = self._buf
        if buf is not None and self._start == self._end:
            self._buf = None
            give_read_buffer(buf)
            buf = None
        if buf is None:
            while True:
                buf = take_read_buffer()
                try:
                    n = self._recv_into(buf)
                except BlockingIOError:
                    give_read_buffer(buf)
                    await self._wait_readable()
                    continue
                except OSError as exc:
                    raise ConnectionClosed() from exc
                break
            if n == 0:
                give_read_buffer(buf)
                raise ConnectionClosed()
            self._buf = buf
            self._start, self._end = 0, n
            self.last_active = time.monotonic()
            if n == len(buf):
                self._drain_small()
            return
        if len(buf) - self._start < need:
            remaining = self._end - self._start
            buf[:remaining] = buf[self._start : self._end]
            self._start, self._end = 0, remaining
        view = memoryview(buf)[self._end :]
        while True:
            try:
                n = self._recv_into(view)
                break
            except BlockingIOError:
                await self._wait_readable()
            except OSError as exc:
                raise ConnectionClosed() from exc
        if n == 0:
            raise ConnectionClosed()
        self._end += n
        self.last_active = time.monotonic()
        if n == len(view):
            self._drain_small()

    def _drain_small(self) -> None:
        """The read filled the buffer, so more may wait in the socket: if the client
        sends small requests, take it all ahead now (see _read_ahead). A busy broker
        reads from the buffer without waiting for the loop between requests, so the
        loop's readiness callback (_read_ahead_idle) does not run meanwhile; without
        this the socket held what the 64 KiB buffer could not, and overfilled. The
        callback's own rule decides (small requests only, when reading ahead is allowed)."""
        self._read_ahead_idle()

    async def _read_large(self, size: int) -> memoryview:
        """A frame too big for the read-ahead buffer, in its own growing buffer."""
        if self.pool is not None:
            # bytes read ahead hold pool bytes until all are read, and may be this very
            # frame's: kept while it waits, they could exhaust the pool this connection
            # alone waits on, and it would wait for bytes only it can give back. They
            # stay bounded by READ_AHEAD_MAX_BYTES; new read-ahead is counted again
            self._release_ahead()
            # reads pause while the pool is exhausted; the wait is not idleness
            self.request_started(time.monotonic())
            try:
                await self.pool.reserve(size)
            finally:
                self.request_done()
            self._reserved = size
        buffered = self._end - self._start
        big = self._big
        if big is None or len(big) < size:
            big = mmap.mmap(-1, size if size <= LARGE_FIRST_BYTES
                            else max(LARGE_FIRST_BYTES, buffered), flags=mmap.MAP_PRIVATE)
        buf = self._buf
        if buf is not None:
            if buffered:
                big[:buffered] = memoryview(buf)[self._start : self._end]
            self._buf = None
            self._start = self._end = 0
            give_read_buffer(buf)
        filled = buffered
        while filled < size:
            if filled == len(big):
                # no view of this buffer is alive here, so it can move (mremap, no copy)
                big.resize(min(size, 2 * len(big)))
            with memoryview(big) as view:
                try:
                    n = self._recv_into(view[filled:size])
                except BlockingIOError:
                    n = -1
                except OSError as exc:
                    raise ConnectionClosed() from exc
            if n < 0:
                await self._wait_readable()
                continue
            if n == 0:
                raise ConnectionClosed()
            filled += n
            self.last_active = time.monotonic()
        # reused across requests: a fresh mapping per 1 MB produce would cost page faults
        self._big = big if len(big) <= LARGE_BUFFER_KEEP_BYTES else None
        return memoryview(big)[:size]

    def _recv_into(self, target: mmap.mmap | memoryview) -> int:
        """sock.recv_into, taking bytes read ahead first (see _read_ahead)."""
        ahead = self._ahead
        if ahead is None:
            if self._ahead_end:
                return 0
            return self.sock.recv_into(target)
        n = min(len(target), len(ahead))
        with memoryview(target) as dst, memoryview(ahead) as src:
            dst[:n] = src[:n]
        del ahead[:n]  # a bytearray drops its head without moving the rest
        if not ahead:
            self._ahead = None
            self._release_ahead()
        return n

    def _read_ahead(self) -> None:
        """Take what the client has sent into memory, unhandled, while a send waits.

        A client that pipelines thousands of small requests (one producer to 10,000
        partitions: one Produce request per partition) fills the broker's socket receive
        buffer with small segments, whose kernel overhead far exceeds their bytes. If
        the broker stops reading while its own send waits (as Kafka does: it mutes a
        channel until its response is sent), the full buffer drops segments, both ends
        back off to retransmit timeouts, and the client sees nothing for a minute
        (bench/produce_fanout.py). Reading on keeps the receive buffer drained.
        Requests are still handled one at a time, in order, after the send: this only
        moves their bytes. Bounded by READ_AHEAD_MAX_BYTES (4 MiB) per connection and by
        `queued.max.request.bytes` when set: past either, reading stops, and a client
        that never reads its responses holds at most that much here."""
        ahead = self._ahead
        held = len(ahead) if ahead is not None else 0
        pool = self.pool
        while held < READ_AHEAD_MAX_BYTES and not self._ahead_end:
            if pool is not None and pool.available <= 0:
                return
            try:
                chunk = self.sock.recv(min(READ_BUFFER_BYTES, READ_AHEAD_MAX_BYTES - held))
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                chunk = b""
            if not chunk:
                # the peer's end (or a reset): the read path sees it after these bytes
                self._ahead_end = True
                return
            if ahead is None:
                ahead = self._ahead = bytearray()
            ahead += chunk
            held += len(chunk)
            if pool is not None:
                pool.available -= len(chunk)
                self._ahead_reserved += len(chunk)
            self.last_active = time.monotonic()

    def _read_ahead_idle(self) -> bool:
        """Bytes arrived while nobody reads (a request is being handled): read them
        ahead if the client sends small requests, whose small segments overfill the
        receive buffer (see _read_ahead) while a busy broker handles the ones before;
        large requests come in large segments and are left in the socket, not copied.
        True: keep the readiness callback (reading on); False: drop it."""
        if not self._small or not self._may_read_ahead():
            return False
        self._read_ahead()
        return self._may_read_ahead()

    def _may_read_ahead(self) -> bool:
        """Whether a waiting send may read ahead: a plain socket (TLS records must not be
        read while OpenSSL waits to write one) whose read side nobody else is using (the
        connection's task waiting to read, or the sweeper watching for the peer)."""
        return (type(self.sock) is socket.socket and not self._ahead_end
                and not self._readable.waiting and self._watch != _WATCH_ON
                and (self._ahead is None or len(self._ahead) < READ_AHEAD_MAX_BYTES))

    def _release_ahead(self) -> None:
        if self.pool is not None and self._ahead_reserved:
            self.pool.release(self._ahead_reserved)
        self._ahead_reserved = 0

    async def _wait_readable(self) -> None:
        """Nothing more to read now: send what is queued, then wait for the client."""
        if self._out:
            await self.flush()
            if self._ahead is not None or self._ahead_end:
                return  # the flush read ahead: those bytes come first
        await self._readable.wait()

    def _release_reservation(self) -> None:
        if self.pool is not None and self._reserved:
            self.pool.release(self._reserved)
        self._reserved = 0

    def release_idle_buffers(self) -> None:
        """Drop the large request buffer of an idle connection (a view of it that is
        still in use keeps it alive until it goes)."""
        self._big = None

    # --- requests being handled ---
    def request_started(self, since: float) -> None:
        """A request arrived at `since` and is being handled: the connection is not
        idle, and the sweeper watches its socket if the handler waits long."""
        self.handling_since = since
        if self.registry is not None:
            self.registry.handling.add(self)

    def request_done(self) -> None:
        if self._watch == _WATCH_ON:
            self._unwatch()
        self._watch = _WATCH_OFF
        self.handling_since = 0.0
        self.last_active = time.monotonic()
        if self.registry is not None:
            self.registry.handling.discard(self)

    @property
    def watching(self) -> bool:
        return self._watch != _WATCH_OFF

    def watch_peer(self) -> None:
        """Watch the socket while a request waits (called by the sweeper): if the
        client closes (EOF or reset), the connection is cancelled. The connection
        task reads nothing while its request is handled, so the reader slot of the
        socket's fd is free. Needs the asyncio loop (the broker runs on it)."""
        try:
            loop = asyncio.get_running_loop()
            # the watch takes the fd's reader slot over from the read path's callback
            self._readable.hand_over()
            loop.add_reader(self.fd, self._peer_readable)
        except (RuntimeError, OSError, ValueError) as exc:
            log.debug("cannot watch %s: %s", self.peer, exc)
            self._watch = _WATCH_SUSPENDED
            return
        self._loop = loop
        self._watch = _WATCH_ON

    def _unwatch(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.fd)
            self._loop = None

    def _peer_readable(self) -> None:
        try:
            data = self.sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        self._unwatch()
        if data:
            # the client pipelined its next request: its bytes wait until the handler
            # is done (watching on would only spin on a readable socket), read ahead
            # if they are small requests (the read path's callback takes over again)
            self._watch = _WATCH_SUSPENDED
            if self._read_ahead_idle():
                self._readable.register()
            return
        self._watch = _WATCH_SUSPENDED
        self.abort("peer closed")

    def abort(self, reason: str) -> None:
        """End the connection from outside its task (idle, peer gone)."""
        self.close_reason = reason
        if self.scope is not None:
            self.scope.cancel()

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
        large file slices by sendfile(2).

        Owed answers (pybroker.server.deferred) are written from tasks of their own, so
        two flushes may overlap: the second leaves its parts to the one already sending,
        which sends until the queue is empty, so bytes never interleave."""
        if self._flushing:
            return
        self._flushing = True
        try:
            while self._out:
                await self._send_queued()
        finally:
            self._flushing = False

    async def _send_queued(self) -> None:
        try:
            await self._send_parts()
        finally:
            self._writable.stop()

    async def _send_parts(self) -> None:
        out, self._out, self._out_count = self._out, [], 0
        iov: list[memoryview] = []
        for part in out:
            if isinstance(part, (bytes, bytearray, memoryview)):
                iov.append(memoryview(part))
            elif (part.length <= SMALL_SLICE_BYTES  # type: ignore[attr-defined]
                  or not self.zero_copy):
                # one pread + the shared sendmsg beats a sendfile syscall of its own
                iov.append(memoryview(self._read_slice(part)))
            else:
                if iov:
                    # MSG_MORE: the header goes out with the slice's first bytes, one
                    # segment instead of a small one of its own that the peer is woken for
                    await self._send_buffers(iov, MSG_MORE)
                    iov = []
                await self._send_slice(part)
        if iov:
            await self._send_buffers(iov)

    def _read_slice(self, file_slice: object) -> bytes:
        try:
            return file_slice.read()  # type: ignore[attr-defined, no-any-return]
        except StorageError as exc:
            # the response's size is already promised: the connection cannot go on
            log.error("closing %s: reading log bytes for its response failed: %s. The "
                      "client reconnects; if it repeats, check the log dir's disk", self.peer,
                      exc)
            raise ConnectionClosed() from exc

    async def _send_buffers(self, views: list[memoryview], flags: int = 0) -> None:
        first = 0
        while first < len(views):
            try:
                n = self.sock.sendmsg(views[first : first + IOV_MAX], [], flags) if flags \
                    else self.sock.sendmsg(views[first : first + IOV_MAX])
            except BlockingIOError:
                await self._wait_writable()
                continue
            except OSError as exc:
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
                await self._wait_writable()
                continue
            except OSError as exc:  # the socket side: reset, broken pipe, timeout...
                raise ConnectionClosed() from exc
            except StorageError as exc:  # the file side
                log.error("closing %s: sending log bytes failed: %s. The client "
                          "reconnects; if it repeats, check the log dir's disk", self.peer,
                          exc)
                raise ConnectionClosed() from exc
            if n == 0:
                # the file shrank under us (truncation); the frame size is already
                # promised, so the connection cannot continue
                raise ConnectionClosed()
            sent += n

    async def _wait_writable(self) -> None:
        """The socket's send buffer is full: wait until it takes more bytes, reading
        ahead what the client sends meanwhile (see _read_ahead). A large response (a
        follower's fetch of a megabyte) waits several times; the callback stays
        registered until the queued responses are sent (_send_queued stops it)."""
        if self._may_read_ahead():
            self._read_ahead()
            if self._may_read_ahead():
                # woken by either; a send that still finds no room comes back here
                await wait_either(self._writable, self._readable)
                self.last_active = time.monotonic()
                return
        await self._writable.wait()
        self.last_active = time.monotonic()

    def close(self) -> None:
        """Close the socket and let go of everything the connection holds."""
        if self._watch == _WATCH_ON:
            self._unwatch()
            self._watch = _WATCH_SUSPENDED
        try:
            self._readable.stop()  # before the fd is closed (and maybe reused)
        except (OSError, ValueError, RuntimeError):
            pass
        try:
            self._writable.stop()
        except (OSError, ValueError, RuntimeError):
            pass
        self._release_reservation()
        self._release_ahead()
        self._ahead = None
        # buffers are dropped, not cached: a frame of a failed request may still be viewed
        self._buf = None
        self._big = None
        self._out = []
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
        await conn.deferred.drain()
        await conn.flush()
    except ConnectionClosed:
        # the peer may have closed only its sending side: it still gets its answers
        with anyio.move_on_after(1):
            await conn.deferred.drain()
            await _flush_quietly(conn)
    except FrameTooLarge as exc:
        refused.warning("closing %s: request size %s outside [0, %d]", conn.peer, exc.args[0],
                    conn.max_request_bytes)
        with anyio.move_on_after(1):
            await conn.deferred.drain()
            await _flush_quietly(conn)
    finally:
        # owed answers of a connection that ends otherwise are dropped (the client
        # retries them elsewhere, as after any lost connection)
        conn.deferred.cancel()
        conn.close()


async def _flush_quietly(conn: Connection) -> None:
    """Answer what was already handled before dropping a connection for bad input."""
    try:
        await conn.flush()
    except (ConnectionClosed, OSError):
        pass
