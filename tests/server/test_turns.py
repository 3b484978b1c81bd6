"""A connection whose client keeps it busy does not keep the event loop from the others.

A connection's task handles request after request without suspending while its client's
bytes are there to read, and asyncio switches tasks only where one suspends: a producer
pipelining small requests to a busy broker kept the loop for 270 ms on end while the
consumer's Fetch waited unread (issue 26). Between requests a busy connection now lets
the loop run the others once per LOOP_TURN_S."""

from __future__ import annotations

import socket
import struct
import time

import anyio

from pybroker.server.connection import LOOP_TURN_S, Connection, serve_connection

MAX_REQUEST = 104_857_600
BUFFER_BYTES = 1 << 20
#: each request costs the handler this much CPU (a busy broker's per-request work)
WORK_S = 0.0002


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """(server side, client side) of a loopback TCP connection whose buffers hold a
    whole backlog of small requests."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER_BYTES)
        client.connect(listener.getsockname())
        server, _ = listener.accept()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER_BYTES)
    return server, client


def request(n: int) -> bytes:
    """Request n: its number and padding, 100 bytes framed."""
    return struct.pack(">ii", 96, n) + bytes(92)


def test_a_connection_with_a_backlog_lets_another_one_be_answered_meanwhile() -> None:
    """Connection A has 1,000 requests waiting (0.2 s of handling), connection B one,
    sent after them. B is handled while A still has most of its backlog ahead: within
    a few turns' worth of A's requests, not after all of them. Fails on the old code:
    B was handled after A's 1,000th request, once A's socket ran dry."""
    backlog = 1000
    handled: list[tuple[str, int]] = []

    def handler(name: str):  # type: ignore[no-untyped-def]
        async def handle(conn: Connection, frame: memoryview) -> bool:
            handled.append((name, int.from_bytes(frame[:4], "big")))
            until = time.perf_counter() + WORK_S
            while time.perf_counter() < until:  # CPU, no suspension: a produce's append
                pass
            return True
        return handle

    async def main() -> None:
        a_server, a_client = tcp_pair()
        b_server, b_client = tcp_pair()
        a_client.sendall(b"".join(request(n) for n in range(backlog)))
        b_client.sendall(request(0))
        a_conn = Connection(a_server, MAX_REQUEST)
        b_conn = Connection(b_server, MAX_REQUEST)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve_connection, a_conn, handler("a"))
                tg.start_soon(serve_connection, b_conn, handler("b"))
                while ("b", 0) not in handled or len(handled) < backlog + 1:
                    await anyio.sleep(0.01)
                a_client.close()
                b_client.close()

    anyio.run(main, backend="asyncio")
    before_b = handled.index(("b", 0))
    # a turn is LOOP_TURN_S of A's requests; the first reads of A's bytes and a loaded
    # machine (a preempted handler ends a turn early, never late) leave slack
    assert before_b < backlog // 4, (
        f"B was handled after {before_b} of A's {backlog} requests "
        f"(a turn is about {LOOP_TURN_S / WORK_S:.0f})")
    assert [n for name, n in handled if name == "a"] == list(range(backlog))
