"""The live connections, and the sweeper that keeps them honest.

Every SWEEP_INTERVAL_S the sweeper:

- arms the peer-close watch of each request that has waited WATCH_AFTER_S or
  more (a long-poll Fetch, a JoinGroup waiting for the group): if the client
  goes away meanwhile, its connection is cancelled at once, which runs the
  handler's cleanup (purgatory waiters, group waiters) and frees the socket and
  buffers. Requests answered sooner never pay for the watch: the hot path only
  adds the connection to a set and removes it;
- closes connections idle longer than `connections.max.idle.ms` (as Kafka does,
  idle is measured from the last bytes read or written; a connection whose
  request is being handled is not idle);
- drops the large request buffer of connections idle for BUFFER_IDLE_S, so a
  burst of big produce requests does not pin memory afterwards."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio

from pybroker.errors import BUG_REPORT

if TYPE_CHECKING:
    from pybroker.server.connection import Connection

log = logging.getLogger(__name__)

#: how often the sweeper runs
SWEEP_INTERVAL_S = 0.1
#: a request handled for this long gets its socket watched for the peer closing
WATCH_AFTER_S = 0.1
#: the idle scan over every connection runs at most this often
IDLE_SCAN_INTERVAL_S = 1.0
#: a connection idle this long gives back its large request buffer
BUFFER_IDLE_S = 5.0


class ConnectionRegistry:
    def __init__(self, max_idle_ms: int) -> None:
        #: negative: idle connections are never closed (Kafka's -1)
        self.max_idle_s = max_idle_ms / 1000 if max_idle_ms >= 0 else -1.0
        self.live: set[Connection] = set()
        #: connections with a request being handled (see Connection.request_started)
        self.handling: set[Connection] = set()
        self.idle_closed = 0

    def add(self, conn: Connection) -> None:
        self.live.add(conn)

    def remove(self, conn: Connection) -> None:
        self.live.discard(conn)
        self.handling.discard(conn)

    async def run(self) -> None:
        """Sweep until cancelled."""
        next_idle_scan = 0.0
        while True:
            await anyio.sleep(SWEEP_INTERVAL_S)
            now = time.monotonic()
            try:
                self.watch_waiting(now)
                if now >= next_idle_scan:
                    next_idle_scan = now + self._idle_scan_interval()
                    self.close_idle(now)
            except Exception:
                log.exception("the idle-connection sweep failed; it runs again. " + BUG_REPORT)

    def _idle_scan_interval(self) -> float:
        if self.max_idle_s < 0:
            return IDLE_SCAN_INTERVAL_S
        return max(SWEEP_INTERVAL_S, min(IDLE_SCAN_INTERVAL_S, self.max_idle_s / 4))

    def watch_waiting(self, now: float) -> None:
        for conn in self.handling:
            if not conn.watching and now - conn.handling_since >= WATCH_AFTER_S:
                conn.watch_peer()

    def close_idle(self, now: float) -> None:
        max_idle = self.max_idle_s
        for conn in list(self.live):
            if conn.handling_since:
                continue
            idle = now - conn.last_active
            if 0 <= max_idle < idle:
                log.debug("closing %s: idle for %.0f ms (connections.max.idle.ms)", conn.peer,
                          idle * 1000)
                self.idle_closed += 1
                conn.abort("idle")
            elif idle >= BUFFER_IDLE_S:
                conn.release_idle_buffers()
