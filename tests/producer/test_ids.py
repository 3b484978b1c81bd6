from pathlib import Path

from pybroker.coordination.embedded import EmbeddedStore
from pybroker.producer.ids import ProducerIdAllocator


def test_ids_are_unique_across_restarts(tmp_path: Path) -> None:
    first = ProducerIdAllocator(EmbeddedStore(tmp_path, 0), block_size=3)
    ids = [first.next_id() for _ in range(4)]
    assert ids == [0, 1, 2, 3]
    # a restart skips the rest of the reserved block rather than reusing it
    second = ProducerIdAllocator(EmbeddedStore(tmp_path, 0), block_size=3)
    assert second.next_id() == 6
