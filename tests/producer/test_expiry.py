"""Idle idempotent producers are forgotten after producer.id.expiration.ms."""

from __future__ import annotations

from pathlib import Path

import anyio
from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker._core import AppendResult
from pybroker.config import BrokerConfig, TopicConfig
from pybroker.log.partition import Partition
from pybroker.producer.expiry import expire_pass, expiry_loop

WRITTEN_AT_MS = 1_000_000


def leader_append(p: Partition, records: object) -> AppendResult:
    """Append as the only replica's leader (epoch 0): the high watermark follows."""
    result = p.append(records, 0)  # type: ignore[arg-type]
    p.update_high_watermark(p.log.log_end_offset)
    return result


def batch(producer_id: int, first_seq: int, n: int) -> memoryview:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=0,
                                  base_sequence=first_seq, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=WRITTEN_AT_MS, key=None, value=b"v", headers=[])
    return memoryview(bytes(b.build()))


def partition(tmp_path: Path) -> Partition:
    return Partition("t", 0, tmp_path / "t-0", TopicConfig(BrokerConfig({}), {}),
                     recovery_point=0, log_start_offset=0, clean_shutdown=False)


def test_idle_producer_is_forgotten_and_may_come_back(tmp_path: Path) -> None:
    p = partition(tmp_path)
    first = batch(7, 0, 3)
    leader_append(p, first)
    leader_append(p, batch(8, 0, 1))
    assert leader_append(p, first).base_offset == 0  # a retry is recognised as a duplicate
    assert p.log.log_end_offset == 4

    day = 86_400_000
    # not idle long enough yet
    assert expire_pass([p], day, now_ms=WRITTEN_AT_MS + day - 1) == 0
    assert leader_append(p, first).base_offset == 0
    assert expire_pass([p], day, now_ms=WRITTEN_AT_MS + day) == 2
    assert expire_pass([p], day, now_ms=WRITTEN_AT_MS + day) == 0

    # Kafka accepts a producer it has no state for at any sequence...
    assert leader_append(p, batch(7, 3, 2)).base_offset == 4
    # ...and from then on checks its sequence again
    assert leader_append(p, batch(7, 3, 2)).base_offset == 4
    assert p.log.log_end_offset == 6
    p.close()


def test_the_loop_expires_on_its_interval(tmp_path: Path) -> None:
    p = partition(tmp_path)
    leader_append(p, batch(1, 0, 1))  # written "long ago" (WRITTEN_AT_MS)

    async def run() -> None:
        with anyio.move_on_after(0.2):
            await expiry_loop(lambda: [p], interval_ms=20, max_age_ms=60_000)

    anyio.run(run)
    # forgotten: the same batch is no longer a duplicate
    assert leader_append(p, batch(1, 0, 1)).base_offset == 1
    p.close()
