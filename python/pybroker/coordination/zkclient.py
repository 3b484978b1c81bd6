"""kazoo, awaited from the event loop.

kazoo runs its connection and its callbacks on threads of its own. Every request here
goes through kazoo's *_async methods (they only queue the request and wake kazoo's
connection thread, so calling them from the loop does not block it); the kazoo
result is moved back onto the loop with call_soon_threadsafe and awaited. Session
state changes (kazoo listeners, called on kazoo's thread) arrive on the loop the same
way, through `on_state`.

Why requests are tracked: kazoo drops requests still queued (not yet sent) when a
session expires, without completing them; `session_expired()` fails every request
in flight so no caller waits forever. Each request also has a deadline
(`request_timeout_s`), because while ZooKeeper is unreachable kazoo keeps requests
queued until it reconnects. Both become CoordinationUnavailable.

Why connection attempts are bounded: kazoo waits for the answer to a connection's first
request (ConnectRequest) for the whole session timeout, and a ZooKeeper that is still
starting can leave a connection open and unanswered for good (ZooKeeper 3.8: closing a
connection before its database is loaded fails inside the server, ZOOKEEPER-5051). A
broker started in the same second as its ZooKeeper then spent all of
zookeeper.connection.timeout.ms on that one connection and exited. An attempt with no
answer within a third of that time is dropped here, and kazoo connects again."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult

from pybroker.coordination import znodes as zn
from pybroker.coordination.base import ControllerLease
from pybroker.coordination.errors import (
    ControllerMoved,
    CoordinationError,
    CoordinationUnavailable,
)
from pybroker.coordination.zkio import PollSelect, ReadBuffer

log = logging.getLogger(__name__)

#: kazoo errors that mean "ZooKeeper is not reachable right now"
UNAVAILABLE = (ConnectionLoss, SessionExpiredError, ConnectionClosedError, OperationTimeoutError)

#: kazoo's reconnect backoff: keep trying forever, at most this long between attempts
RECONNECT_DELAY_MAX_S = 1.0
#: connection attempts that fit in the connection (or session) timeout: one attempt's
#: wait for ZooKeeper's answer is the timeout over this
CONNECT_ATTEMPTS = 3


C = TypeVar("C", bound=type)


def kazoo_errors_translated(cls: C) -> C:
    """Class decorator: every public coroutine method raises CoordinationError instead of
    a kazoo exception nobody expected (the expected ones are handled in the method)."""
    for name, method in list(vars(cls).items()):
        if name.startswith("_") or not inspect.iscoroutinefunction(method):
            continue

        def wrap(method: Any) -> Any:
            @functools.wraps(method)
            async def translated(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await method(*args, **kwargs)
                except KazooException as exc:
                    raise CoordinationError(
                        f"unexpected ZooKeeper error in {method.__name__}: {exc!r}") from exc
            return translated

        setattr(cls, name, wrap(method))
    return cls


def split_connect(connect: str) -> tuple[str, str]:
    """`h1:p1,h2:p2/chroot/path` -> ("h1:p1,h2:p2", "/chroot/path"); chroot "" if none."""
    hosts, slash, chroot = connect.strip().partition("/")
    chroot = ("/" + chroot.rstrip("/")) if slash else ""
    if chroot == "/":
        chroot = ""
    if not hosts:
        raise ValueError(f"zookeeper.connect {connect!r} names no host")
    return hosts, chroot


class _BoundedAttempts(PollSelect):
    """kazoo's threading handler (with zkio.py's cheap select), dropping a connection
    that has had no answer to its ConnectRequest within `attempt_s` (see the module's
    docstring): its socket is shut down, kazoo's connection thread sees the connection
    broken and connects again."""

    def __init__(self, session_timeout_s: float) -> None:
        super().__init__()
        self.attempt_s = session_timeout_s / CONNECT_ATTEMPTS
        #: set once the client is attached: whether a session's handshake has completed
        self.connected: Callable[[], bool] = lambda: False

    def create_connection(self, *args: Any, **kwargs: Any) -> socket.socket:
        sock: socket.socket = super().create_connection(*args, **kwargs)
        timer = threading.Timer(self.attempt_s, self._unanswered, args=(sock,))
        timer.daemon = True
        timer.start()
        return sock

    def _unanswered(self, sock: socket.socket) -> None:  # on the timer's thread
        # one connection at a time: connected now means this one was answered (or is
        # closed already, a later attempt being the one connected)
        if self.connected():
            return
        try:
            peer = sock.getpeername()
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # closed by kazoo already: that attempt ended by itself
            return
        log.info("ZooKeeper at %s:%s has not answered a new connection within %.1fs "
                 "(a ZooKeeper still starting can leave it unanswered); connecting again",
                 peer[0], peer[1], self.attempt_s)


class AsyncKazoo:
    def __init__(self, hosts: str, *, session_timeout_s: float, request_timeout_s: float,
                 on_state: Callable[[KazooState, int | None], None] | None = None) -> None:
        self._handler = _BoundedAttempts(session_timeout_s)
        self.kazoo = KazooClient(
            hosts=hosts, timeout=session_timeout_s, handler=self._handler,
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2,
                              "max_delay": RECONNECT_DELAY_MAX_S},
        )
        self._handler.connected = lambda: bool(self.kazoo.connected)
        ReadBuffer.install(self.kazoo, self._handler)
        self.session_timeout_s = session_timeout_s
        self.request_timeout_s = request_timeout_s
        self._on_state = on_state
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_flight: set[asyncio.Future[Any]] = set()

    @property
    def session_id(self) -> int | None:
        client_id = self.kazoo.client_id
        return client_id[0] if client_id else None

    async def start(self, connection_timeout_s: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._handler.attempt_s = min(connection_timeout_s,
                                      self.session_timeout_s) / CONNECT_ATTEMPTS
        self.kazoo.add_listener(self._listener)
        try:
            await anyio.to_thread.run_sync(self.kazoo.start, connection_timeout_s)
        except KazooTimeoutError as exc:
            raise CoordinationUnavailable(
                f"could not connect to ZooKeeper at {self.kazoo.hosts} within "
                f"{connection_timeout_s}s") from exc

    async def stop(self) -> None:
        """Close the session (its ephemerals go at once) and kazoo's threads."""
        self.kazoo.remove_listener(self._listener)

        def stop_and_close() -> None:
            self.kazoo.stop()
            self.kazoo.close()

        await anyio.to_thread.run_sync(stop_and_close)
        self.session_expired("client closed")

    def session_expired(self, why: str = "ZooKeeper session expired") -> None:
        """Fail every request in flight (kazoo forgets queued ones on expiry)."""
        for future in list(self._in_flight):
            if not future.done():
                future.set_exception(CoordinationUnavailable(why))
        self._in_flight.clear()

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`await call("get", path, watch=w)` runs kazoo's get_async(path, watch=w).
        kazoo's own errors (NoNodeError, BadVersionError, ...) pass through; losing
        ZooKeeper becomes CoordinationUnavailable."""
        return await self.wait(getattr(self.kazoo, method + "_async")(*args, **kwargs))

    async def commit(self, txn: TransactionRequest) -> list[Any]:
        """Commit a multi; the per-operation results (values or kazoo exceptions)."""
        return await self.wait(txn.commit_async())

    async def wait(self, result: IAsyncResult) -> Any:
        loop = self._loop
        assert loop is not None, "start() first"
        future: asyncio.Future[Any] = loop.create_future()
        self._in_flight.add(future)

        def settle(value: Any, exc: BaseException | None) -> None:
            self._in_flight.discard(future)
            if future.done():
                return
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(value)

        def completed(res: IAsyncResult) -> None:  # on a kazoo thread
            try:
                loop.call_soon_threadsafe(settle, res.value, res.exception)
            except RuntimeError:  # loop closed: nobody waits any more
                pass

        result.rawlink(completed)
        try:
            with anyio.fail_after(self.request_timeout_s):
                return await future
        except TimeoutError as exc:
            raise CoordinationUnavailable(
                f"no answer from ZooKeeper within {self.request_timeout_s}s") from exc
        except UNAVAILABLE as exc:
            raise CoordinationUnavailable(f"ZooKeeper unavailable: {exc!r}") from exc
        finally:
            self._in_flight.discard(future)

    def _listener(self, state: KazooState) -> None:  # on a kazoo thread
        loop = self._loop
        if loop is None or self._on_state is None:
            return
        client_id = self.kazoo.client_id
        session = client_id[0] if client_id else None
        try:
            loop.call_soon_threadsafe(self._on_state, state, session)
        except RuntimeError:
            pass


# --- multis (ZooKeeper transactions), fenced by the controller epoch ---------------------

def fenced_multi(zk: AsyncKazoo, lease: ControllerLease | None) -> TransactionRequest:
    """A multi that, with a lease, first checks /controller_epoch's version (Kafka's
    checkControllerEpoch before every controller write)."""
    txn = zk.kazoo.transaction()
    if lease is not None:
        txn.check(zn.CONTROLLER_EPOCH, lease.epoch_zk_version)
    return txn


async def commit(zk: AsyncKazoo, txn: TransactionRequest,
                 lease: ControllerLease | None) -> list[Any]:
    """Commit; ControllerMoved if the lease's fence failed. Otherwise the operations'
    results without the fence's: values, or kazoo exceptions for a failed multi."""
    results = await zk.commit(txn)
    if lease is not None:
        fence, results = results[0], results[1:]
        if isinstance(fence, (BadVersionError, NoNodeError)):
            raise ControllerMoved(
                f"/controller_epoch is no longer at version {lease.epoch_zk_version}: "
                f"controller epoch {lease.epoch} (broker {lease.broker_id}) was superseded")
    return results


def first_error(results: list[Any]) -> tuple[int, Exception] | None:
    """(index, error) of the operation that failed a multi, or None if it succeeded."""
    for index, result in enumerate(results):
        # the others report RolledBack (before it) or RuntimeInconsistency (after it)
        if isinstance(result, Exception) and not isinstance(
                result, (RolledBackError, RuntimeInconsistency)):
            return index, result
    return None
