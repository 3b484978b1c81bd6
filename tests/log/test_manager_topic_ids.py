"""A partition dir left by an earlier topic of the same name (deleted and created again
while this broker was down) is deleted when the new topic's partition opens: its records
must not become the new topic's (partition.metadata's topic id tells them apart)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

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


def test_unreadable_partition_metadata_is_neither_adopted_nor_deleted(tmp_path: Path) -> None:
    """Whose log it is cannot be told: opening it is refused, and the dir is left as it
    is (the next start, the file repaired, decides); the replica layer serves the
    topic's other partitions and not this one."""
    from pybroker.config import BrokerConfig
    from pybroker.log.manager import LogManager, UnreadablePartitionMetadata
    from pybroker.metadata.cache import MetadataCache
    from pybroker.purgatory import Purgatory
    from pybroker.replica.fetcher import ReplicaFetcherManager
    from pybroker.replica.manager import ReplicaManager

    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    filled(tmp_path, old_id)
    metadata_file = tmp_path / "t-0" / "partition.metadata"
    metadata_file.write_text("version: 0\ntopic_id: not-base64!\n")
    before = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}
    for topic_id in (new_id, old_id):
        m = start(tmp_path, TopicRecord("t", topic_id, [], {}))
        with pytest.raises(UnreadablePartitionMetadata, match="partition.metadata"):
            m.open_partition(record(topic_id), 0)
        assert m.get("t", 0) is None
        m.shutdown()
    assert {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()} == before

    config = BrokerConfig({"log.dirs": str(tmp_path)})
    logs = LogManager(config, "cluster")
    logs.startup()
    replicas = ReplicaManager(0, logs, Purgatory(),
                              ReplicaFetcherManager(0, MetadataCache("cluster"), config))
    two = TopicRecord("t", new_id, [PartitionState(leader=0, leader_epoch=0, replicas=[0],
                                                   isr=[0]) for _ in range(2)], {})
    replicas.apply_topic(two)
    assert replicas.get("t", 0) is None and replicas.get("t", 1) is not None
    logs.shutdown()
    assert (tmp_path / "t-0" / "partition.metadata").read_bytes() == before["partition.metadata"]


def test_a_log_without_partition_metadata_is_adopted(tmp_path: Path) -> None:
    """A log from before topic ids (no partition.metadata) is the topic's, as in Kafka."""
    topic_id = uuid.uuid4()
    filled(tmp_path, topic_id)
    (tmp_path / "t-0" / "partition.metadata").unlink()
    m = start(tmp_path, record(topic_id))
    p = m.get("t", 0)
    assert p is not None and p.log.log_end_offset == 10
    assert read_partition_metadata(tmp_path / "t-0") == topic_id
    m.shutdown()


def test_a_deleted_topic_goes_aside_at_once_and_its_files_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """delete_topic renames the dirs aside before it returns (a topic created again
    under the name starts clean) and leaves removing the files to a thread of its own:
    DeleteTopics is answered without waiting for that (issue 25). The thread is held
    here until the test has seen the renamed dirs still there."""
    import threading

    from pybroker.log import manager

    release = threading.Event()
    removed = threading.Event()
    real_remove = manager._remove_dirs

    def held_remove(paths: list[Path]) -> None:
        assert release.wait(30)
        real_remove(paths)
        removed.set()

    monkeypatch.setattr(manager, "_remove_dirs", held_remove)
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    m = start(tmp_path, record(old_id))
    p = m.get("t", 0)
    assert p is not None
    p.append(memoryview(make_batch(10)), 0)
    m.delete_topic("t")
    aside = [d for d in tmp_path.iterdir() if d.name.endswith("-delete")]
    assert not (tmp_path / "t-0").exists() and len(aside) == 1
    assert m.get("t", 0) is None

    again = m.open_partition(record(new_id), 0)
    assert again.log.log_end_offset == 0
    assert read_partition_metadata(tmp_path / "t-0") == new_id
    release.set()
    assert removed.wait(30)
    assert not aside[0].exists()
    m.shutdown()
