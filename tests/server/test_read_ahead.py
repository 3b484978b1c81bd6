"""A connection reads on while its responses wait for room in the socket's send buffer
(bench/produce_fanout.py: one producer pipelining a small Produce request per partition
to 10,000 partitions stalled for a minute when the broker stopped reading while its send
was blocked). The requests are still handled one at a time and answered in order; the
bytes read ahead are bounded per connection and by `queued.max.request.bytes`."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable

import anyio

from pybroker.server.connection import (
    READ_AHEAD_MAX_BYTES,
    Connection,
    serve_connection,
)
from pybroker.server.memory import RequestMemoryPool

MAX_REQUEST = 104_857_600
WAIT_S = 30
#: small fixed buffers on both ends, so responses back up after a few requests
BUFFER_BYTES = 16384


def run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main, backend="asyncio")


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """(server side, client side) of a loopback TCP connection with small buffers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER_BYTES)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER_BYTES)
        client.connect(listener.getsockname())
        server, _ = listener.accept()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER_BYTES)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER_BYTES)
    return server, client


def request(n: int) -> bytes:
    """Request n: its number and padding, 100 bytes framed."""
    return struct.pack(">ii", 96, n) + bytes(92)


async def answer_each(conn: Connection, frame: memoryview) -> bool:
    """Answer a request with its number and 400 bytes (answers outgrow requests, as a
    producer's acks of tiny batches to many partitions do), held to go out together
    like produce acks."""
    n = int.from_bytes(frame[:4], "big")
    await conn.write([struct.pack(">ii", 404, n) + bytes(400)], flush=False)
    return True


def test_a_client_that_sends_all_its_requests_before_reading_gets_every_answer_in_order(
        ) -> None:
    """The client writes 3,000 pipelined requests (300 KB) before it reads an answer, as
    a producer whose send is blocked does. A connection that stopped reading while its
    answers wait deadlocks with it (each waits for the other's buffer); reading ahead,
    every answer arrives, in request order. Fails on the old code: no answer in time."""
    count = 3000

    async def main() -> None:
        server, client = tcp_pair()
        conn = Connection(server, MAX_REQUEST)
        sent = threading.Event()
        client.settimeout(WAIT_S)

        def client_side() -> list[int]:
            client.sendall(b"".join(request(n) for n in range(count)))
            sent.set()
            got = bytearray()
            while len(got) < count * 408:
                chunk = client.recv(65536)
                if not chunk:
                    break
                got += chunk
            return [struct.unpack_from(">ii", got, i * 408)[1] for i in range(len(got) // 408)]

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve_connection, conn, answer_each)
                with anyio.fail_after(WAIT_S):
                    answers = await anyio.to_thread.run_sync(client_side, abandon_on_cancel=True)
                tg.cancel_scope.cancel()
            assert sent.is_set()
            assert answers == list(range(count))
        finally:
            conn.close()
            client.close()
    run(main)


def _fill_until_blocked(client: socket.socket, quiet_s: float, bound_s: float) -> int:
    """Send numbered requests until the socket takes nothing for quiet_s; the bytes
    sent (the last request may be cut short)."""
    client.setblocking(False)
    batch = 1000
    sent = 0
    pending = memoryview(b"")
    last = time.monotonic()
    deadline = last + bound_s
    while time.monotonic() < deadline:
        if not pending:
            first = sent // 100
            pending = memoryview(b"".join(request(n) for n in range(first, first + batch)))
        try:
            n = client.send(pending)
        except BlockingIOError:
            if time.monotonic() - last > quiet_s:
                return sent
            time.sleep(0.01)
            continue
        sent += n
        pending = pending[n:]
        last = time.monotonic()
    raise AssertionError(f"the broker still took bytes after {bound_s} s: {sent} sent")


def _has_bytes(sock: socket.socket) -> bool:
    """Whether bytes wait in a non-blocking socket (its recv raises when none do yet)."""
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return False


def _read_answers(client: socket.socket, count: int) -> list[int]:
    client.settimeout(WAIT_S)
    got = bytearray()
    while len(got) < count * 408:
        chunk = client.recv(65536)
        if not chunk:
            break
        got += chunk
    return [struct.unpack_from(">ii", got, i * 408)[1] for i in range(len(got) // 408)]


def test_a_client_that_never_reads_its_answers_holds_a_bounded_read_ahead() -> None:
    """A client that sends and never reads: the connection reads ahead up to its bound,
    then stops reading, so the client's sends block (TCP's own back-pressure) and the
    broker holds no more than READ_AHEAD_MAX_BYTES of its requests."""

    async def main() -> None:
        server, client = tcp_pair()
        conn = Connection(server, MAX_REQUEST)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve_connection, conn, answer_each)
                sent = await anyio.to_thread.run_sync(_fill_until_blocked, client, 1.0,
                                                      WAIT_S)
                assert conn._ahead is not None
                held = len(conn._ahead)
                assert READ_AHEAD_MAX_BYTES - 65536 <= held <= READ_AHEAD_MAX_BYTES
                # what the client got into the broker: the read ahead, the requests
                # handled before the answers backed up, and the kernel's buffers
                assert sent <= READ_AHEAD_MAX_BYTES + 8 * BUFFER_BYTES * 32
                tg.cancel_scope.cancel()
        finally:
            conn.close()
            client.close()
    run(main)


def test_read_ahead_counts_against_queued_max_request_bytes_and_gives_it_back() -> None:
    """With `queued.max.request.bytes` set, bytes read ahead take from its pool: reading
    ahead stops once the pool is spent (the client's sends block sooner), and what was
    taken goes back once the requests are read; every request is answered, in order."""
    pool_bytes = 200_000

    async def main() -> None:
        server, client = tcp_pair()
        pool = RequestMemoryPool(pool_bytes)
        conn = Connection(server, MAX_REQUEST, pool=pool)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve_connection, conn, answer_each)
                sent = await anyio.to_thread.run_sync(_fill_until_blocked, client, 1.0,
                                                      WAIT_S)
                assert conn._ahead is not None
                held = len(conn._ahead)
                assert pool_bytes <= held < pool_bytes + 65536  # stopped once spent
                assert pool.available == pool_bytes - held
                complete = sent // 100
                with anyio.fail_after(WAIT_S):
                    answers = await anyio.to_thread.run_sync(_read_answers, client,
                                                             complete)
                assert answers == list(range(complete))
                with anyio.fail_after(WAIT_S):  # the last bytes are taken as it flushes
                    while conn._ahead is not None:
                        await anyio.sleep(0.01)
                assert pool.available == pool_bytes
                tg.cancel_scope.cancel()
        finally:
            conn.close()
            client.close()
    run(main)


def test_small_requests_arriving_while_one_is_handled_are_read_ahead() -> None:
    """While a handler waits (a busy broker), the client's next small requests are read
    ahead rather than left to overfill the socket's receive buffer: a client sending
    200 KB of them through 16 KB buffers finishes its send before the first request is
    answered; then every request is answered, in order. Fails on the old code: the
    client's send blocks until the handler goes on."""
    count = 2000

    async def main() -> None:
        server, client = tcp_pair()
        conn = Connection(server, MAX_REQUEST)
        go_on = anyio.Event()
        client.settimeout(WAIT_S)

        async def first_waits(conn: Connection, frame: memoryview) -> bool:
            if int.from_bytes(frame[:4], "big") == 0:
                await go_on.wait()
            return await answer_each(conn, frame)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve_connection, conn, first_waits)
                with anyio.fail_after(WAIT_S):
                    await anyio.to_thread.run_sync(
                        client.sendall, b"".join(request(n) for n in range(count)),
                        abandon_on_cancel=True)
                assert conn._ahead is not None
                go_on.set()
                with anyio.fail_after(WAIT_S):
                    answers = await anyio.to_thread.run_sync(_read_answers, client, count,
                                                             abandon_on_cancel=True)
                assert answers == list(range(count))
                tg.cancel_scope.cancel()
        finally:
            conn.close()
            client.close()
    run(main)



def test_a_read_that_fills_the_buffer_takes_the_rest_of_small_requests_ahead() -> None:
    """A busy connection goes from request to request without the loop polling between
    them, so the readiness callback cannot read ahead; instead a read that fills the
    64 KiB buffer, after a small request, takes what else waits in the socket, and the
    client's small requests do not pile up in the receive buffer. Fails without it:
    nothing is read ahead, the rest stays in the socket."""
    count = 2000

    async def main() -> None:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            client = socket.create_connection(listener.getsockname())
            server, _ = listener.accept()
        conn = Connection(server, MAX_REQUEST)
        try:
            client.settimeout(WAIT_S)
            with anyio.fail_after(WAIT_S):
                await anyio.to_thread.run_sync(
                    client.sendall, b"".join(request(n) for n in range(count)))
                # past the first 64 KiB: the second read comes after small requests
                for n in range(700):
                    frame = await conn.read_frame()
                    assert int.from_bytes(frame[:4], "big") == n
            assert conn._ahead is not None and len(conn._ahead) > 0
            with anyio.fail_after(WAIT_S):
                for n in range(700, count):
                    frame = await conn.read_frame()
                    assert int.from_bytes(frame[:4], "big") == n
        finally:
            conn.close()
            client.close()
    run(main)


def test_a_large_request_read_ahead_into_a_spent_pool_is_still_read() -> None:
    """A connection whose read-ahead spent `queued.max.request.bytes` and then meets a
    large request (one read into its own reserved buffer) must not wait for pool bytes
    only it holds: its own read-ahead is given back first. Fails on the old code: the
    read waits on the pool for ever (here until the bound)."""
    pool_bytes = 100_000
    size = 150_000  # past the small-frame buffer: read by _read_large, which reserves

    async def main() -> None:
        server, client = tcp_pair()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        pool = RequestMemoryPool(pool_bytes)
        conn = Connection(server, MAX_REQUEST, pool=pool)
        body = struct.pack(">i", 7) + bytes(size - 4)
        try:
            sender = threading.Thread(
                target=client.sendall, args=(struct.pack(">i", size) + body,))
            sender.start()
            with anyio.fail_after(WAIT_S):  # the bytes reach the broker's socket
                while not _has_bytes(conn.sock):
                    await anyio.sleep(0.01)
                held = 0
                while held < pool_bytes:  # a send blocked meanwhile reads ahead
                    conn._read_ahead()
                    held = len(conn._ahead) if conn._ahead is not None else 0
                    await anyio.sleep(0.01)
            assert pool.available <= 0  # the read-ahead spent the pool
            with anyio.fail_after(5):
                frame = await conn.read_frame()
            assert len(frame) == size and int.from_bytes(frame[:4], "big") == 7
            sender.join(WAIT_S)
            conn._release_reservation()
            assert pool.available == pool_bytes
        finally:
            conn.close()
            client.close()
    run(main)
