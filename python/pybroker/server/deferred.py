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
answered exactly as if the connection had waited. Answers go out in request order:
each one waits for the one before it, and the answers that become ready together
(one high watermark move settles several requests) go out in one send.

What an answer waits for references nothing of its request's bytes (those may be
reused for the next frame as soon as the records are appended)."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pybroker.errors import BUG_REPORT

if TYPE_CHECKING:
    from pybroker.server.connection import Connection

log = logging.getLogger(__name__)

#: answers a connection may owe at once; a client pipelining more waits for the oldest
#: (bounded like the requests Kafka's muted channel would have left in the socket)
MAX_DEFERRED = 16


class DeferredResponse:
    """What a handler returns when its answer comes later: `answer()` waits for it and
    returns the response body. The connection reads on meanwhile."""

    __slots__ = ("answer",)

    def __init__(self, answer: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self.answer = answer


class _Entry:
    __slots__ = ("task", "ready")

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        #: its answer is encoded and waits only for the answers before it
        self.ready = False


class DeferredAnswers:
    """One connection's owed answers, oldest first."""

    __slots__ = ("_conn", "_entries", "_broken")

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._entries: collections.deque[_Entry] = collections.deque()
        #: a send failed or an answer could not be made: the connection is being closed
        #: and nothing more is written to it
        self._broken = False

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, answer: Callable[[], Awaitable[Sequence[object]]]) -> None:
        """Owe the answer `answer()` makes (the encoded response's parts), after every
        answer owed so far."""
        previous = self._entries[-1] if self._entries else None
        entry = _Entry()
        entry.task = asyncio.get_running_loop().create_task(self._run(entry, previous, answer))
        self._entries.append(entry)

    async def _run(self, entry: _Entry, previous: _Entry | None,
                   answer: Callable[[], Awaitable[Sequence[object]]]) -> None:
        from pybroker.server.connection import ConnectionClosed

        conn = self._conn
        try:
            parts = await answer()
            entry.ready = True
            if previous is not None and previous.task is not None and not previous.task.done():
                await asyncio.wait((previous.task,))
            if self._broken:
                return
            await conn.write(parts, flush=False)
            self._entries.remove(entry)  # the oldest: all before it are written
            following = self._entries[0] if self._entries else None
            if following is None or not following.ready:
                # the answers ready by now go in one send; one still waiting must not
                # hold them back
                await conn.flush()
        except ConnectionClosed:
            self._broken = True
            conn.abort("peer closed")
        except Exception:
            self._broken = True
            log.exception("answering a request of %s failed: the connection is closed (the "
                          "client reconnects and retries); " + BUG_REPORT, conn.peer)
            conn.abort("a deferred answer failed")
        finally:
            if entry in self._entries:
                self._entries.remove(entry)

    async def wait_below(self, count: int) -> None:
        """Until fewer than `count` answers are owed."""
        while len(self._entries) >= count:
            task = self._entries[0].task
            assert task is not None
            await asyncio.wait((task,))

    async def drain(self) -> None:
        """Until every owed answer has been queued on the connection, in order."""
        await self.wait_below(1)

    def cancel(self) -> None:
        """The connection ends: its owed answers are dropped."""
        self._broken = True
        for entry in self._entries:
            if entry.task is not None:
                entry.task.cancel()
