"""LogManager reads replication-offset-checkpoint back at startup: each partition
opens with its checkpointed high watermark, kept inside its log."""

from __future__ import annotations

import uuid
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.log.checkpoint import read_checkpoint, write_checkpoint
from pybroker.log.manager import REPLICATION_FILE, LogManager


def make_batch(n: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_000 + i, key=None, value=b"v", headers=[])
    return bytes(b.build())


def start(root: Path, record: TopicRecord) -> LogManager:
    m = LogManager(BrokerConfig({"log.dirs": str(root)}), "cluster")
    m.startup()
    for index in range(len(record.partitions)):
        m.open_partition(record, index)
    return m


def test_checkpointed_high_watermark_is_read_back_and_clamped(tmp_path: Path) -> None:
    states = [PartitionState(leader=0, leader_epoch=0, replicas=[0], isr=[0]) for _ in range(3)]
    record = TopicRecord("t", uuid.uuid4(), states, {})
    m = start(tmp_path, record)
    for index in range(3):
        p = m.get("t", index)
        assert p is not None
        p.append(memoryview(make_batch(10)), 0)
        p.update_high_watermark(7)
    m.shutdown()
    assert read_checkpoint(tmp_path / REPLICATION_FILE) == {("t", i): 7 for i in range(3)}
    # below the end (a follower's), above it (recovery cut the log), missing
    write_checkpoint(tmp_path / REPLICATION_FILE, {("t", 0): 4, ("t", 1): 99})
    m = start(tmp_path, record)
    hws = []
    for index in range(3):
        p = m.get("t", index)
        assert p is not None
        hws.append(p.high_watermark)
    assert hws == [4, 10, 0]
    m.shutdown()
