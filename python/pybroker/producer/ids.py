"""Hands out producer ids from blocks reserved in the metadata store, so an id
is never reused, not even after a crash (unused ids of a block are skipped)."""

from __future__ import annotations

from pybroker.coordination.base import MetadataStore

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, store: MetadataStore, block_size: int = BLOCK_SIZE) -> None:
        self.store = store
        self.block_size = block_size
        self._block: range = range(0)
        self._next = 0

    def next_id(self) -> int:
        if self._next >= self._block.stop:
            self._block = self.store.allocate_producer_ids(self.block_size)
            self._next = self._block.start
        pid = self._next
        self._next += 1
        return pid
