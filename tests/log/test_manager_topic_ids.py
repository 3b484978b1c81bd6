"""A partition dir left by an earlier topic of the same name (deleted and created again
while this broker was down) is deleted when the new topic's partition opens: its records
must not become the new topic's (partition.metadata's topic id tells them apart)."""

from __future__ import annotations

import uuid
from pathlib import Path

from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.log.manager import read_partition_metadata

from .test_manager_high_watermark import make_batch, start


def record(topic_id: uuid.UUID) -> TopicRecord:
    return TopicRecord("t", topic_id, [PartitionState(leader=0, leader_epoch=0, replicas=[0],
                                                      isr=[0])], {})


def filled(root: Path, topic_id: uuid.UUID) -> None:
    m = start(root, record(topic_id))
    p = m.get("t", 0)
    assert p is not None
    p.append(memoryview(make_batch(10)), 0)
    p.update_high_watermark(10)
    m.shutdown()  # writes the checkpoints (high watermark, recovery point)


def test_log_of_an_earlier_topic_with_the_same_name_is_deleted(tmp_path: Path) -> None:
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    filled(tmp_path, old_id)
    m = start(tmp_path, record(new_id))
    p = m.get("t", 0)
    assert p is not None
    assert (p.log.log_end_offset, p.high_watermark, p.log.log_start_offset) == (0, 0, 0)
    assert read_partition_metadata(tmp_path / "t-0") == new_id
    assert not [d for d in tmp_path.iterdir() if d.name.endswith("-delete")]
    m.shutdown()


def test_log_of_the_same_topic_is_kept(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    filled(tmp_path, topic_id)
    m = start(tmp_path, record(topic_id))
    p = m.get("t", 0)
    assert p is not None
    assert (p.log.log_end_offset, p.high_watermark) == (10, 10)
    m.shutdown()
