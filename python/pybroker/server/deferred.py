"""Answers a connection still owes for requests it has already read past.

A connection handles its requests in order, one at a time (Kafka mutes a channel until
its response is sent). For an acks=all produce that has to wait for its followers this
made every request a client pipelines behind it wait a full replication round before
it was even read: with five produce requests in flight a record waited about five
rounds, one after the other, where one round would replicate all five (issue 26).

So an acks=all produce, once its records are appended, may hand the wait for its ISR
to this queue and let the connection read on. Only acks=all produces do (each one's
records are still appended in request order, as they are read); any other request
first waits until every answer owed before it has been queued, so it sees and is
answered exactly as if the connection had waited. Answers go out in request order,
and the answers that become ready together (one high watermark move settles several
requests) go out in one send.

One task per connection writes the owed answers (started with the first, ending with
the last): it waits in the purgatory for the oldest only, since nothing behind it may
go first, and then takes every answer behind it that is ready too. A task, a purgatory
registration and a timer per produce were a fifth of the leader's Python time at 5,000
acks=all records/s (issue 26).

What an answer waits for references nothing of its request's bytes (those may be
reused for the next frame as soon as the records are appended)."""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from pybroker.errors import BUG_REPORT

if TYPE_CHECKING:
    from pybroker.purgatory import Purgatory
    from pybroker.server.connection import Connection

log = logging.getLogger(__name__)

#: answers a connection may owe at once; a client pipelining more waits for the oldest
#: (bounded like the requests Kafka's muted channel would have left in the socket)
MAX_DEFERRED = 16
#: the purgatory kind the owed answers count under (its size metric)
KIND = "produce"


class DeferredResponse:
    """What a handler returns when its answer comes later: the connection reads on
    meanwhile. `settled()` says whether the answer can be made now; until `deadline`
    (time.monotonic()) it is re-checked whenever one of `keys` is notified in
    `purgatory`; `finish()` then makes the response body (also at the deadline, when
    it answers what is still missing with its timeout error)."""

    __slots__ = ("purgatory", "keys", "settled", "finish", "deadline")

    def __init__(self, purgatory: Purgatory, keys: list[Hashable],
                 settled: Callable[[], bool], finish: Callable[[], dict[str, Any]],
                 deadline: float) -> None:
        self.purgatory = purgatory
        self.keys = keys
        self.settled = settled
        self.finish = finish
        self.deadline = deadline


class _Entry:
    __slots__ = ("waits", "encode")

    def __init__(self, waits: DeferredResponse | None,
                 encode: Callable[[], Sequence[object]]) -> None:
        #: what the answer waits for; None: nothing (it waits only for those before it)
        self.waits = waits
        #: the encoded response's parts, once it may be made
        self.encode = encode


class DeferredAnswers:
    """One connection's owed answers, oldest first, and the task writing them."""

    __slots__ = ("_conn", "_entries", "_broken", "_writer", "_progress", "_counted")

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._entries: collections.deque[_Entry] = collections.deque()
        #: a send failed or an answer could not be made: the connection is being closed
        #: and nothing more is written to it
        self._broken = False
        self._writer: asyncio.Task[None] | None = None
        #: resolved when owed answers are written (see wait_below)
        self._progress: asyncio.Future[None] | None = None
        #: the purgatory whose size counts our waiting answers, and how many it counts
        self._counted: tuple[Purgatory, int] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def add(self, waits: DeferredResponse | None,
            encode: Callable[[], Sequence[object]]) -> None:
        """Owe an answer after every answer owed so far: `encode()` makes its parts
        once `waits` (if any) is settled or past its deadline."""
        self._entries.append(_Entry(waits, encode))
        if waits is not None:
            self._count(waits.purgatory, 1)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    def _count(self, purgatory: Purgatory, delta: int) -> None:
        purgatory.waiting[KIND] += delta
        held = self._counted[1] if self._counted is not None else 0
        self._counted = (purgatory, held + delta) if held + delta else None

    async def _write(self) -> None:
        from pybroker.server.connection import ConnectionClosed

        conn = self._conn
        entries = self._entries
        try:
            while entries and not self._broken:
                head = entries[0].waits
                if head is not None:
                    # counted per owed answer already (add)
                    await head.purgatory.wait_until(KIND, head.keys, head.settled,
                                                    head.deadline, counted=False)
                # the oldest may be answered: so may each behind it that is settled too,
                # all in one send
                while entries:
                    waits = entries[0].waits
                    if waits is not None and not (waits.settled()
                                                  or waits.deadline <= time.monotonic()):
                        break
                    entry = entries.popleft()
                    if waits is not None:
                        self._count(waits.purgatory, -1)
                    await conn.write(entry.encode(), flush=False)
                self._wake()
                await conn.flush()
        except ConnectionClosed:
            self._broken = True
            conn.abort("peer closed")
        except asyncio.CancelledError:
            self._broken = True
            raise
        except Exception:
            self._broken = True
            log.exception("answering a request of %s failed: the connection is closed (the "
                          "client reconnects and retries); " + BUG_REPORT, conn.peer)
            conn.abort("a deferred answer failed")
        finally:
            self._writer = None
            if self._broken:
                self._drop()
            self._wake()

    def _wake(self) -> None:
        progress, self._progress = self._progress, None
        if progress is not None and not progress.done():
            progress.set_result(None)

    def _drop(self) -> None:
        self._entries.clear()
        if self._counted is not None:
            purgatory, held = self._counted
            purgatory.waiting[KIND] -= held
            self._counted = None

    async def wait_below(self, count: int) -> None:
        """Until fewer than `count` answers are owed (an answer no longer owed is queued
        on the connection)."""
        while len(self._entries) >= count:
            if self._progress is None:
                self._progress = asyncio.get_running_loop().create_future()
            await self._progress

    async def drain(self) -> None:
        """Until every owed answer has been queued on the connection, in order."""
        await self.wait_below(1)

    def cancel(self) -> None:
        """The connection ends: its owed answers are dropped."""
        self._broken = True
        if self._writer is not None:
            self._writer.cancel()
        self._drop()
        self._wake()
