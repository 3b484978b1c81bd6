from pathlib import Path

import anyio

from pybroker.coordination.embedded import EmbeddedBackend
from pybroker.producer.ids import ProducerIdAllocator


def test_ids_are_unique_across_restarts(tmp_path: Path) -> None:
    async def run() -> None:
        first = ProducerIdAllocator(EmbeddedBackend(tmp_path, 0), 0, block_size=3)
        ids = [await first.next_id() for _ in range(4)]
        assert ids == [0, 1, 2, 3]
        # a restart skips the rest of the reserved block rather than reusing it
        second = ProducerIdAllocator(EmbeddedBackend(tmp_path, 0), 0, block_size=3)
        assert await second.next_id() == 6

    anyio.run(run)
