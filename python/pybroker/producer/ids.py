"""Hands out producer ids from blocks reserved in the coordination store, so an
id is never reused, on any broker, not even after a crash (unused ids of a
block are skipped)."""

from __future__ import annotations

import anyio

from pybroker.coordination.base import PRODUCER_ID_BLOCK_SIZE, CoordinationBackend


class ProducerIdAllocator:
    def __init__(self, backend: CoordinationBackend, broker_id: int,
                 block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.backend = backend
        self.broker_id = broker_id
        self.block_size = block_size
        self._block: range = range(0)
        self._next = 0
        self._lock = anyio.Lock()

    async def next_id(self) -> int:
        async with self._lock:  # one block request at a time
            if self._next >= self._block.stop:
                self._block = await self.backend.allocate_producer_ids(self.broker_id,
                                                                       self.block_size)
                self._next = self._block.start
            pid = self._next
            self._next += 1
            return pid
