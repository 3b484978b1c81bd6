"""Memory that connections hold for requests: the read-ahead buffers they share,
and the bound on request bytes (`queued.max.request.bytes`).

Read-ahead buffers: a connection borrows one only while it has bytes to parse
and gives it back as soon as it has none, so an idle connection holds no
buffer, and a busy broker reuses a few buffers instead of allocating and
zeroing one per request. They are anonymous mappings, not heap blocks: pages
are only touched as bytes arrive, and a buffer freed is returned to the OS at
once (64 KiB blocks on the malloc heap stay with the process, fragmented, after
a burst of connections goes).

`RequestMemoryPool` is Kafka's memory pool (SimpleMemoryPool, non-strict, as
the broker uses it): a request that needs its own buffer reserves its whole
size before its body is read; the reservation succeeds whenever any memory is
left (the pool may go negative, so one request as large as the pool still
passes) and otherwise waits until requests in flight give theirs back. The
connection does not read meanwhile: reads pause, they do not fail. Reserving
the whole size up front (not byte by byte) means an admitted request can
always finish, so connections cannot deadlock on partial requests."""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING

import anyio

from pybroker.config import ConfigError

if TYPE_CHECKING:
    from pybroker.config import BrokerConfig

#: size of a read-ahead buffer; small requests (and pipelined ones) are parsed from it
READ_BUFFER_BYTES = 65536
#: read-ahead buffers kept for reuse; more are freed when given back
READ_BUFFERS_KEPT = 64

_free_read_buffers: list[mmap.mmap] = []


def take_read_buffer() -> mmap.mmap:
    """A read-ahead buffer (contents undefined)."""
    if _free_read_buffers:
        return _free_read_buffers.pop()
    return mmap.mmap(-1, READ_BUFFER_BYTES, flags=mmap.MAP_PRIVATE)


def give_read_buffer(buf: mmap.mmap) -> None:
    """Return a buffer no one references any more (no frame points into it)."""
    if len(_free_read_buffers) < READ_BUFFERS_KEPT:
        _free_read_buffers.append(buf)


class RequestMemoryPool:
    """Bytes that requests read into their own buffers may hold together."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.available = max_bytes
        #: connections waiting for memory (reads paused)
        self.waiting = 0
        self._freed: anyio.Event | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> RequestMemoryPool | None:
        """The pool `queued.max.request.bytes` asks for; None when unbounded (<= 0)."""
        max_bytes: int = config["queued.max.request.bytes"]
        if max_bytes <= 0:
            return None
        if max_bytes < config["socket.request.max.bytes"]:
            # as Kafka requires: the largest request must fit the pool
            raise ConfigError("queued.max.request.bytes must be larger or equal to "
                              "socket.request.max.bytes")
        return cls(max_bytes)

    async def reserve(self, size: int) -> None:
        """Take `size` bytes, waiting while none are left."""
        while self.available <= 0:
            if self._freed is None:
                self._freed = anyio.Event()
            freed = self._freed
            self.waiting += 1
            try:
                await freed.wait()
            finally:
                self.waiting -= 1
        self.available -= size

    def release(self, size: int) -> None:
        self.available += size
        if self._freed is not None and self.available > 0:
            self._freed.set()
            self._freed = None
