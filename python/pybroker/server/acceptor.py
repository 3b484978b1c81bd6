"""Accepting client connections on the listening sockets and serving each one in
its own task.

One bad client never takes the broker down: whatever a connection's task
raises is logged once, with the peer, and ends that connection alone (Kafka's
acceptor and processors catch everything for the same reason)."""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from pybroker.config import BrokerConfig
from pybroker.errors import BUG_REPORT
from pybroker.security.session import Session
from pybroker.security.tls import TlsSocket, certificate_principal, handshake
from pybroker.metrics import BrokerMetrics
from pybroker.server.connection import Connection, serve_connection
from pybroker.server.memory import RequestMemoryPool
from pybroker.server.quotas import ConnectionQuotas
from pybroker.server.listeners import Listener
from pybroker.server.registry import ConnectionRegistry

log = logging.getLogger(__name__)

FrameHandler = Callable[[Connection, memoryview], Awaitable[bool]]

#: how long accept backs off after EMFILE and friends
ACCEPT_BACKOFF_S = 0.1


class ConnectionServer:
    """What every listener shares: the request handler, the connection limits,
    the request memory pool and the live connections."""

    def __init__(self, config: BrokerConfig, handle_frame: FrameHandler,
                 metrics: BrokerMetrics,
                 tls_contexts: dict[str, ssl.SSLContext] | None = None) -> None:
        self.config = config
        #: TLS listeners' server contexts, by listener name (pybroker.security.tls)
        self.tls_contexts = tls_contexts or {}
        self.handle_frame = handle_frame
        self.metrics = metrics
        self.max_request_bytes: int = config["socket.request.max.bytes"]
        self.quotas = ConnectionQuotas.from_config(config)
        self.pool = RequestMemoryPool.from_config(config)
        self.registry = ConnectionRegistry(config["connections.max.idle.ms"])

    async def run(self) -> None:
        """The sweeper (peer-close watches, idle connections); runs until cancelled."""
        await self.registry.run()

    async def accept_loop(self, tg: anyio.abc.TaskGroup, sock: socket.socket,
                          listener: Listener | None = None) -> None:
        while True:
            try:
                await self.quotas.wait_for_slot()
                await self._accept_one(tg, sock, listener)
            except Exception:  # never let one connection's setup end the listener
                log.exception("accepting a connection failed; the listener goes on. "
                              + BUG_REPORT)
                await anyio.sleep(ACCEPT_BACKOFF_S)

    async def _accept_one(self, tg: anyio.abc.TaskGroup, sock: socket.socket,
                          listener: Listener | None = None) -> None:
        try:
            client, address = sock.accept()
        except BlockingIOError:
            await anyio.wait_readable(sock)
            return
        except OSError as exc:  # EMFILE and friends: back off, keep serving
            log.warning("accepting a connection failed: %s; trying again shortly. With "
                        "'Too many open files', raise the broker's file limit (ulimit -n) "
                        "or lower max.connections", exc)
            await anyio.sleep(ACCEPT_BACKOFF_S)
            return
        host = str(address[0])
        if not self.quotas.add(host):
            log.info("Rejected connection from %s, address already has the configured "
                     "maximum of %d connections.", host, self.quotas.limit_for(host))
            self.quotas.remove(host)
            client.close()
            return
        tls = self.tls_contexts.get(listener.name) if listener is not None else None
        try:
            configure_socket(client, self.config)
            wrapped: socket.socket | TlsSocket = client
            if tls is not None:
                wrapped = TlsSocket(tls.wrap_socket(client, server_side=True,
                                                    do_handshake_on_connect=False))
            conn = Connection(wrapped, self.max_request_bytes, pool=self.pool,
                              registry=self.registry)
        except OSError as exc:  # the client may already have reset the connection
            log.info("closing %s: setting up the connection failed: %s", host, exc)
            self.quotas.remove(host)
            client.close()
            return
        if listener is not None:
            conn.session = Session.for_listener(listener.name, listener.security_protocol)
            conn.zero_copy = tls is None
        tg.start_soon(self.serve_client, conn, host)

    async def serve_client(self, conn: Connection, host: str) -> None:
        self.metrics.connection_opened()
        self.registry.add(conn)
        try:
            with anyio.CancelScope() as scope:
                conn.scope = scope
                if isinstance(conn.sock, TlsSocket) and not await self._handshake(conn):
                    return
                await serve_connection(conn, self.handle_frame)
            if conn.close_reason is not None:
                log.debug("closed %s: %s", conn.peer, conn.close_reason)
        except Exception:
            log.exception("closing %s: serving it failed (the client reconnects); " + BUG_REPORT,
                          conn.peer)
        finally:
            conn.close()
            self.registry.remove(conn)
            self.quotas.remove(host)
            self.metrics.connection_closed()


    async def _handshake(self, conn: Connection) -> bool:
        """TLS first; a failure (a plaintext client, an untrusted certificate) ends
        this connection alone and counts as a failed authentication, as in Kafka."""
        assert isinstance(conn.sock, TlsSocket) and conn.session is not None
        try:
            await handshake(conn.sock.ssl)
        except (ssl.SSLError, OSError, TimeoutError) as exc:
            log.info("Failed authentication with /%s (SSL handshake failed: %s)", conn.host,
                     exc)
            self.metrics.authentication_failed()
            return False
        conn.last_active = time.monotonic()
        if conn.session.security_protocol == "SSL":
            principal = certificate_principal(conn.sock.ssl)
            if principal is not None:
                conn.session.principal = principal
            self.metrics.authentication_succeeded()
        return True


def configure_socket(client: socket.socket, config: BrokerConfig) -> None:
    """Kafka's settings for an accepted socket: no Nagle, keepalive, buffer sizes."""
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for key, opt in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                     ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
        size = config[key]
        if size > 0:
            client.setsockopt(socket.SOL_SOCKET, opt, size)
