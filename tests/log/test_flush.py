"""Flush policy on a real partition log: flush.messages, flush.ms, counters."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker._core import AppendResult
from pybroker.config import BrokerConfig, TopicConfig
from pybroker.log.flush import flush_pass
from pybroker.log.partition import Partition


def leader_append(p: Partition, records: object) -> AppendResult:
    """Append as the only replica's leader (epoch 0): the high watermark follows."""
    result = p.append(records, 0)  # type: ignore[arg-type]
    p.update_high_watermark(p.log.log_end_offset)
    return result


def batch(n: int) -> memoryview:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1000, key=None, value=b"x", headers=[])
    return memoryview(bytes(b.build()))


def partition(tmp_path: Path, broker: dict[str, str], **overrides: object) -> Partition:
    return Partition("t", 0, tmp_path / "t-0", TopicConfig(BrokerConfig(broker), overrides),
                     recovery_point=0, log_start_offset=0, clean_shutdown=False)


def test_default_leaves_flushing_to_the_os(tmp_path: Path) -> None:
    p = partition(tmp_path, {})
    for _ in range(50):
        leader_append(p, batch(3))
    assert p.flushes == 0
    assert p.log.recovery_point == 0
    assert flush_pass([p]) == 0  # flush.ms defaults to Long.MAX
    p.close()


def test_flush_messages_fsyncs_once_enough_messages_are_unflushed(tmp_path: Path) -> None:
    p = partition(tmp_path, {"log.flush.interval.messages": "5"})
    leader_append(p, batch(3))
    assert (p.flushes, p.log.recovery_point) == (0, 0)
    leader_append(p, batch(3))
    assert (p.flushes, p.log.recovery_point) == (1, 6)
    leader_append(p, batch(5))
    assert (p.flushes, p.log.recovery_point) == (2, 11)
    p.close()


def test_topic_flush_messages_overrides_the_broker(tmp_path: Path) -> None:
    p = partition(tmp_path, {"log.flush.interval.messages": "1000"}, **{"flush.messages": 1})
    leader_append(p, batch(1))
    assert p.flushes == 1
    p.close()


def test_flush_ms_flushes_dirty_logs_only(tmp_path: Path) -> None:
    p = partition(tmp_path, {"log.flush.interval.ms": "0"})
    assert flush_pass([p]) == 0  # nothing unflushed
    leader_append(p, batch(4))
    assert flush_pass([p]) == 1
    assert p.log.recovery_point == 4 and p.flushes == 1
    assert flush_pass([p]) == 0
    p.close()


def test_flush_ms_waits_for_its_interval(tmp_path: Path) -> None:
    p = partition(tmp_path, {"log.flush.interval.ms": "3600000"})
    leader_append(p, batch(4))
    assert flush_pass([p]) == 0
    p.last_flush_ms -= 3600_000
    assert flush_pass([p]) == 1
    p.close()


def append_until_rolled(p: Partition) -> None:
    while p.log.segment_count < 2:
        leader_append(p, batch(20))


def test_a_roll_fsyncs_on_a_worker_thread_not_the_event_loop(tmp_path: Path) -> None:
    """On the event loop a roll's fsyncs (its producer snapshot's) stalled every
    request for as long as they took (issue 26): they run on a worker thread."""
    p = partition(tmp_path, {"log.segment.bytes": "1024"})
    threads: list[int] = []
    flush_rolled = p.flush_rolled

    def recording_flush_rolled() -> None:
        threads.append(threading.get_ident())
        flush_rolled()

    p.flush_rolled = recording_flush_rolled  # type: ignore[method-assign]

    async def roll_and_wait() -> None:
        append_until_rolled(p)
        deadline = time.monotonic() + 30
        while p.log.roll_flush_pending or not threads:
            assert time.monotonic() < deadline, "the roll's snapshot was never fsynced"
            await asyncio.sleep(0.01)

    loop_thread = threading.get_ident()
    asyncio.run(roll_and_wait())
    assert loop_thread not in threads
    assert p.log.recovery_point == 0  # the recovery point is the flush policy's
    p.close()
