"""Serving connections: whatever one connection's task raises ends that connection
only; a client that leaves while its request waits is noticed and its handler
cancelled; idle connections are closed; connection limits count per address."""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Awaitable, Callable

import anyio
import pytest

from pybroker.config import BrokerConfig, ConfigError
from pybroker.metrics import BrokerMetrics
from pybroker.server.acceptor import ConnectionServer
from pybroker.server.connection import Connection
from pybroker.server.memory import RequestMemoryPool
from pybroker.server.quotas import ConnectionQuotas, parse_overrides

from .test_connection import framed, send, tcp_pair

WAIT_S = 10

Handler = Callable[[Connection, memoryview], Awaitable[bool]]


def run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main, backend="asyncio")


async def echo(conn: Connection, frame: memoryview) -> bool:
    await conn.write([framed(bytes(frame))])
    return True


def recv_frame(sock: socket.socket) -> bytes:
    sock.settimeout(WAIT_S)
    head = sock.recv(4, socket.MSG_WAITALL)
    (size,) = struct.unpack(">i", head)
    return sock.recv(size, socket.MSG_WAITALL)


def closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(WAIT_S)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def make_server(handler: Handler, **config: str) -> ConnectionServer:
    return ConnectionServer(BrokerConfig(config), handler, BrokerMetrics())


def test_a_failing_connection_is_logged_once_and_others_go_on(
        caplog: pytest.LogCaptureFixture) -> None:
    async def handler(conn: Connection, frame: memoryview) -> bool:
        if bytes(frame) == b"boom":
            raise RuntimeError("an internal error")
        return await echo(conn, frame)

    async def main() -> None:
        server = make_server(handler)
        bad_server, bad_client = tcp_pair()
        good_server, good_client = tcp_pair()
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve_client, Connection(good_server, 1 << 20), "127.0.0.1")
            tg.start_soon(server.serve_client, Connection(bad_server, 1 << 20), "127.0.0.1")
            server.quotas.add("127.0.0.1")
            server.quotas.add("127.0.0.1")
            await send(good_client, framed(b"hello"))
            assert await anyio.to_thread.run_sync(recv_frame, good_client) == b"hello"
            await send(bad_client, framed(b"boom"))
            assert await anyio.to_thread.run_sync(closed_by_peer, bad_client)
            await send(good_client, framed(b"still here"))
            assert await anyio.to_thread.run_sync(recv_frame, good_client) == b"still here"
            assert server.metrics.connections_open == 1
            good_client.close()
        assert server.metrics.connections_open == 0
        assert server.quotas.total == 0 and not server.registry.live
        bad_client.close()

    with caplog.at_level(logging.ERROR, logger="pybroker.server"):
        run(main)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert "127.0.0.1:" in errors[0].getMessage() and errors[0].exc_info is not None


@pytest.mark.parametrize("how", ["fin", "rst"])
def test_client_leaving_while_its_request_waits_cancels_the_handler(how: str) -> None:
    async def main() -> None:
        cleaned = anyio.Event()

        async def waits_forever(conn: Connection, frame: memoryview) -> bool:
            conn.request_started(time.monotonic())
            try:
                await anyio.sleep_forever()
            finally:
                conn.request_done()
                cleaned.set()
            return True

        server = make_server(waits_forever)
        sock, client = tcp_pair()
        conn = Connection(sock, 1 << 20, registry=server.registry)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.run)
            tg.start_soon(server.serve_client, conn, "127.0.0.1")
            server.quotas.add("127.0.0.1")
            await send(client, framed(b"long poll"))
            with anyio.fail_after(WAIT_S):
                while not conn.watching:
                    await anyio.sleep(0.01)
            if how == "rst":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
            with anyio.fail_after(WAIT_S):
                await cleaned.wait()
                while server.registry.live:
                    await anyio.sleep(0.01)
            assert conn.close_reason == "peer closed"
            assert conn.sock.fileno() == -1, "the socket was not closed"
            assert server.metrics.connections_open == 0
            tg.cancel_scope.cancel()
    run(main)


def test_pipelined_request_suspends_the_watch_instead_of_cancelling() -> None:
    async def main() -> None:
        release = anyio.Event()

        async def first_waits(conn: Connection, frame: memoryview) -> bool:
            conn.request_started(time.monotonic())
            try:
                if bytes(frame) == b"wait":
                    await release.wait()
            finally:
                conn.request_done()
            return await echo(conn, frame)

        server = make_server(first_waits)
        sock, client = tcp_pair()
        conn = Connection(sock, 1 << 20, registry=server.registry)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.run)
            tg.start_soon(server.serve_client, conn, "127.0.0.1")
            server.quotas.add("127.0.0.1")
            await send(client, framed(b"wait"))
            with anyio.fail_after(WAIT_S):
                while not conn.watching:
                    await anyio.sleep(0.01)
            await send(client, framed(b"next"))  # pipelined: the socket is readable
            await anyio.sleep(0.3)
            assert conn.close_reason is None and server.registry.live
            release.set()
            assert await anyio.to_thread.run_sync(recv_frame, client) == b"wait"
            assert await anyio.to_thread.run_sync(recv_frame, client) == b"next"
            client.close()
            with anyio.fail_after(WAIT_S):
                while server.registry.live:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    run(main)


def test_idle_connections_are_closed_but_busy_ones_are_not() -> None:
    async def main() -> None:
        release = anyio.Event()

        async def handler(conn: Connection, frame: memoryview) -> bool:
            if bytes(frame) == b"busy":
                conn.request_started(time.monotonic())
                try:
                    await release.wait()
                finally:
                    conn.request_done()
            return await echo(conn, frame)

        server = make_server(handler, **{"connections.max.idle.ms": "300"})
        (idle_sock, idle_client), (busy_sock, busy_client) = tcp_pair(), tcp_pair()
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.run)
            for sock in (idle_sock, busy_sock):
                tg.start_soon(server.serve_client,
                              Connection(sock, 1 << 20, registry=server.registry), "127.0.0.1")
                server.quotas.add("127.0.0.1")
            await send(idle_client, framed(b"hi"))
            assert await anyio.to_thread.run_sync(recv_frame, idle_client) == b"hi"
            await send(busy_client, framed(b"busy"))
            assert await anyio.to_thread.run_sync(closed_by_peer, idle_client)
            assert server.registry.idle_closed == 1 and len(server.registry.live) == 1
            await anyio.sleep(0.5)  # busy longer than connections.max.idle.ms
            release.set()
            assert await anyio.to_thread.run_sync(recv_frame, busy_client) == b"busy"
            tg.cancel_scope.cancel()
        idle_client.close()
        busy_client.close()
    run(main)


def test_quotas_count_per_address_and_wait_for_a_slot() -> None:
    async def main() -> None:
        quotas = ConnectionQuotas(2, 1, {"10.0.0.1": 3})
        assert quotas.add("127.0.0.1")
        assert not quotas.add("127.0.0.1")  # over max.connections.per.ip: rejected
        quotas.remove("127.0.0.1")
        assert quotas.total == 1
        assert quotas.add("10.0.0.1")  # override
        got_slot = anyio.Event()
        async with anyio.create_task_group() as tg:
            async def waiter() -> None:
                await quotas.wait_for_slot()
                got_slot.set()
            tg.start_soon(waiter)
            await anyio.sleep(0.05)
            assert not got_slot.is_set()  # at max.connections: accepting waits
            quotas.remove("10.0.0.1")
            with anyio.fail_after(WAIT_S):
                await got_slot.wait()
    run(main)


def test_connection_config_is_checked_as_kafka_does() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides("127.0.0.1:200, [::1]:5") == {"127.0.0.1": 200, "::1": 5}
    assert parse_overrides("localhost:7")["127.0.0.1"] == 7
    for bad in ("127.0.0.1", "127.0.0.1:x", ":3", "127.0.0.1:-1"):
        with pytest.raises(ConfigError):
            parse_overrides(bad)
    with pytest.raises(ConfigError):
        ConnectionQuotas.from_config(BrokerConfig({"max.connections.per.ip": "0"}))
    quotas = ConnectionQuotas.from_config(BrokerConfig({
        "max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:2"}))
    assert quotas.limit_for("127.0.0.1") == 2 and quotas.limit_for("10.1.1.1") == 0
    assert RequestMemoryPool.from_config(BrokerConfig()) is None
    with pytest.raises(ConfigError):
        RequestMemoryPool.from_config(BrokerConfig({"queued.max.request.bytes": "1000"}))
    pool = RequestMemoryPool.from_config(BrokerConfig({
        "queued.max.request.bytes": "2000000", "socket.request.max.bytes": "2000000"}))
    assert pool is not None and pool.available == 2_000_000
