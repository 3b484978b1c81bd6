"""The transaction surface of the Rust log as Python sees it (pybroker._core via
log.partition.Partition): markers and their errors, the LSO against the high
watermark, and producer-state expiry sparing producers with an open transaction."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker import _core
from pybroker.config import BrokerConfig, TopicConfig
from pybroker.log.partition import Partition
from pybroker.producer.expiry import expire_pass

WRITTEN_AT_MS = 1_000_000
DAY_MS = 86_400_000


def batch(pid: int, seq: int, n: int = 2, transactional: bool = True) -> memoryview:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                  producer_id=pid, producer_epoch=0, base_sequence=seq,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=WRITTEN_AT_MS, key=None, value=b"v", headers=[])
    return memoryview(bytes(b.build()))


def partition(tmp_path: Path) -> Partition:
    return Partition("t", 0, tmp_path / "t-0", TopicConfig(BrokerConfig({}), {}),
                     recovery_point=0, log_start_offset=0, clean_shutdown=False)


def test_lso_follows_the_high_watermark_and_open_transactions(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.append(batch(-1, -1, 1, transactional=False), 0)  # 0
    p.append(batch(5, 0), 0)  # 1-2
    assert p.log.first_unstable_offset() == 1
    p.update_high_watermark(3)
    assert p.last_stable_offset == 1
    r = p.append_marker(5, 0, 0, True, 0)  # 3
    assert (r.base_offset, r.last_offset, r.record_count) == (3, 3, 1)
    assert p.log.first_unstable_offset() is None
    # the marker is not below the high watermark yet: the LSO stays put
    assert p.last_stable_offset == 1
    p.update_high_watermark(4)
    assert p.last_stable_offset == 4
    with pytest.raises(_core.TransactionCoordinatorFencedError):
        p.append_marker(5, 0, -5, True, 0)
    with pytest.raises(_core.InvalidProducerEpochError):
        p.append_marker(5, -1, 0, True, 0)
    p.append(batch(5, 2), 0)  # 4-5
    with pytest.raises(_core.InvalidTxnStateError):
        p.append(batch(5, 4, transactional=False), 0)
    p.append_marker(5, 0, 0, False, 0)  # 6
    assert p.log.aborted_transactions(0, 7) == [(5, 4)]
    assert p.log.aborted_transactions(0, 4) == []
    p.close()


def test_expiry_spares_producers_with_an_open_transaction(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.append(batch(1, 0), 0)  # open transaction of producer 1
    p.append(batch(2, 0, transactional=False), 0)  # idle idempotent producer 2
    later = WRITTEN_AT_MS + 2 * DAY_MS
    assert expire_pass([p], DAY_MS, now_ms=later) == 1
    assert p.log.producer_count == 1
    assert p.log.first_unstable_offset() == 0
    # ended, it is idle like any other once its marker (stamped with the broker's
    # clock) is old enough
    p.append_marker(1, 0, 0, True, 0)
    now = int(time.time() * 1000)
    assert expire_pass([p], DAY_MS, now_ms=now) == 0, "the marker was just written"
    assert expire_pass([p], DAY_MS, now_ms=now + 2 * DAY_MS) == 1
    assert p.log.producer_count == 0
    p.close()
