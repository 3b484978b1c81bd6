"""The real Dispatcher and handlers over a real Broker on a temp dir, in this process.

No client sockets: a ``RecordingConnection`` stands in for
``server.connection.Connection`` (the dispatcher writes responses to it, reads its
peer address and marks it busy while a handler runs) and keeps every response
frame. ``Broker.serve`` runs in a blocking portal thread (it wires and runs every
part: store, logs, replicas, groups, schedulers), so a test can hand frames to a
``Dispatcher`` over the broker's context from synchronous Hypothesis code. A
request whose handler waits (a long poll, a rebalance) stays in flight while later
ones run, as it would on another connection; ``close()`` cancels what still waits.
"""

from __future__ import annotations

import concurrent.futures
import logging
import struct
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from pybroker.broker import Broker
from pybroker.config import BrokerConfig
from pybroker.protocol import APIS, decode_response, encode_request
from pybroker.server.dispatch import Dispatcher

#: how long a valid request may take to be answered (a loaded 2-core box)
ANSWER_TIMEOUT_S = 30.0


class RecordingConnection:
    """The part of ``Connection`` the dispatcher uses; responses are kept whole."""

    def __init__(self, peer: str = "127.0.0.1:40000") -> None:
        self.peer = peer
        self.host = peer.rpartition(":")[0]
        #: no listener: dispatched as on a PLAINTEXT listener of old (pybroker.security)
        self.session = None
        self.responses: list[bytes] = []

    async def write(self, parts: Sequence[Any], *, flush: bool = True) -> None:
        self.responses.append(b"".join(
            bytes(p) if isinstance(p, (bytes, bytearray, memoryview)) else p.read()
            for p in parts))

    async def flush(self) -> None:
        pass

    # the busy/idle bookkeeping a socket connection keeps for its idle sweeper
    # (connections.max.idle.ms); there is no socket to sweep here
    def request_started(self, received_ms: float) -> None:
        pass

    def request_done(self) -> None:
        pass


@dataclass
class Exchange:
    """One request handed to the dispatcher: its connection and the pending result."""

    frame: bytes
    connection: RecordingConnection
    future: concurrent.futures.Future[bool]
    #: what the caller wants to remember it by
    label: str = ""


class ErrorLog(logging.Handler):
    """Keeps the ERROR records pybroker logs (a handler crash, a failed tick)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[str]:
        out = [f"{r.name}: {r.getMessage()}\n{self.format(r)}" for r in self.records]
        self.records.clear()
        return out


class _Broker(Broker):
    """The broker, minus the signal handlers: those belong to the main thread, and this
    one runs in the portal's."""

    async def _watch_signals(self) -> None:
        await anyio.sleep_forever()


@dataclass
class InProcessBroker:
    data_dir: Path
    overrides: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        settings = {
            # bound but unused: requests go straight to a Dispatcher
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
            # a lone member's JoinGroup completes at once instead of after 3 s
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }
        self.errors = ErrorLog()
        logging.getLogger("pybroker").addHandler(self.errors)
        self.broker = _Broker(BrokerConfig(settings))
        self._portal_cm: AbstractContextManager[BlockingPortal] = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        # serve() wires everything (store, logs, replicas, groups, schedulers) and runs it
        self._serving, _ = self.portal.start_task(self.broker.serve)
        assert self.broker.context is not None
        self.dispatcher = Dispatcher(self.broker.context)
        self.in_flight: list[Exchange] = []
        self._correlation = 0

    def submit(self, frame: bytes, label: str = "") -> Exchange:
        """Hand one frame (no size prefix) to the dispatcher, as a new connection would."""
        conn = RecordingConnection()
        future = self.portal.start_task_soon(self.dispatcher.handle_frame, conn,
                                             memoryview(frame))
        return Exchange(frame, conn, future, label)

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """A valid request through the dispatcher; returns the decoded response body."""
        self._correlation += 1
        frame = b"".join(encode_request(api_key, version, self._correlation, "fuzz", body))[4:]
        exchange = self.submit(frame)
        assert exchange.future.result(ANSWER_TIMEOUT_S) is True, f"{APIS[api_key].name} closed"
        (response,) = exchange.connection.responses
        (size,) = struct.unpack_from(">i", response)
        assert size == len(response) - 4
        correlation_id, decoded = decode_response(api_key, version, response[4:])
        assert correlation_id == self._correlation
        return decoded

    def wait_led(self, topics: Sequence[str], timeout: float = ANSWER_TIMEOUT_S) -> None:
        """Until this broker's metadata shows every partition of `topics` with a leader:
        CreateTopics answers once a topic is written, before its leaders are up (as
        Kafka 4.0's does), and a request sent before then is refused as a client would
        be (NOT_LEADER_OR_FOLLOWER, retried by real clients)."""
        assert self.broker.context is not None
        metadata = self.broker.context.metadata
        deadline = time.monotonic() + timeout

        def led(name: str) -> bool:
            record = metadata.topic(name)
            return record is not None and all(p.leader >= 0 for p in record.partitions)

        while not all(led(name) for name in topics):
            assert time.monotonic() < deadline, f"{topics} not led after {timeout} s"
            time.sleep(0.01)

    def close(self) -> None:
        """Cancel what still waits, stop the broker (a clean shutdown) and its loop."""
        try:
            for exchange in self.in_flight:
                exchange.future.cancel()
            self.portal.call(self.broker.stop)
            self._serving.result(ANSWER_TIMEOUT_S)
        finally:
            self._portal_cm.__exit__(None, None, None)
            logging.getLogger("pybroker").removeHandler(self.errors)
