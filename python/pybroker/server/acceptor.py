"""Accepting client connections on a listening socket and serving each one in
its own task."""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from pybroker.config import BrokerConfig
from pybroker.metrics import BrokerMetrics
from pybroker.server.connection import Connection, serve_connection

log = logging.getLogger(__name__)

FrameHandler = Callable[[Connection, memoryview], Awaitable[bool]]

#: how long accept backs off after EMFILE and friends
ACCEPT_BACKOFF_S = 0.1


async def accept_loop(
    tg: anyio.abc.TaskGroup,
    sock: socket.socket,
    config: BrokerConfig,
    handle_frame: FrameHandler,
    metrics: BrokerMetrics,
) -> None:
    max_bytes = config["socket.request.max.bytes"]
    while True:
        try:
            client, _ = sock.accept()
        except BlockingIOError:
            await anyio.wait_readable(sock)
            continue
        except OSError as exc:  # EMFILE and friends: back off, keep serving
            log.warning("accept failed: %s", exc)
            await anyio.sleep(ACCEPT_BACKOFF_S)
            continue
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        size_buffers(client, config)
        tg.start_soon(serve_client, Connection(client, max_bytes), handle_frame, metrics)


async def serve_client(conn: Connection, handle_frame: FrameHandler,
                       metrics: BrokerMetrics) -> None:
    metrics.connection_opened()
    try:
        await serve_connection(conn, handle_frame)
    finally:
        metrics.connection_closed()


def size_buffers(client: socket.socket, config: BrokerConfig) -> None:
    for key, opt in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                     ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
        size = config[key]
        if size > 0:
            client.setsockopt(socket.SOL_SOCKET, opt, size)
