import json
import shutil
import uuid
from pathlib import Path

import anyio
import pytest

from pybroker.coordination.base import TopicAssignment, VersionedState, validate_topic_name
from pybroker.coordination.embedded import METADATA_FILE, EmbeddedBackend, EmbeddedStore
from pybroker.coordination.errors import MalformedZNode
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.errors import ErrorCode, KafkaError


def test_topics_survive_reopen(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, broker_id=0)
    created = store.create_topic("orders", 3, 1, {"retention.ms": "1000"})
    store.add_partitions("orders", 5)
    again = EmbeddedStore(tmp_path, broker_id=0)
    assert again.cluster_id == store.cluster_id
    topic = again.topics()["orders"]
    assert topic.topic_id == created.topic_id
    assert len(topic.partitions) == 5
    assert topic.configs == {"retention.ms": "1000"}
    again.delete_topic("orders")
    assert "orders" not in EmbeddedStore(tmp_path, broker_id=0).topics()


def test_duplicate_and_unknown_topics(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, broker_id=0)
    store.create_topic("a", 1, 1, {})
    with pytest.raises(KafkaError) as exc:
        store.create_topic("a", 1, 1, {})
    assert exc.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError) as exc:
        store.delete_topic("b")
    assert exc.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad topic", "x/y", "ü"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(KafkaError) as exc:
        validate_topic_name(name)
    assert exc.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize("name", ["a", "a" * 249, "my_topic.v1-x", "__consumer_offsets"])
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


CORPUS = Path(__file__).parent / "corpus"


def copy_v1(tmp_path: Path) -> Path:
    """A data dir whose metadata file was written by pybroker before cluster mode."""
    shutil.copy(CORPUS / "v1-pybroker-metadata.json", tmp_path / METADATA_FILE)
    return tmp_path


def test_version_1_files_keep_loading(tmp_path: Path) -> None:
    original = json.loads((CORPUS / "v1-pybroker-metadata.json").read_text())
    store = EmbeddedStore(copy_v1(tmp_path), broker_id=0)
    assert store.cluster_id == original["cluster_id"]
    topics = store.topics()
    assert list(topics) == ["orders", "__consumer_offsets"]
    orders = topics["orders"]
    assert str(orders.topic_id) == original["topics"][0]["topic_id"]
    assert [(p.leader, p.leader_epoch, p.replicas, p.isr) for p in orders.partitions] == [
        (0, 0, [0], [0])] * 4
    assert orders.configs == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert store.allocate_producer_ids(10) == range(2000, 2010)  # ids 0-1999 were handed out
    # the first change rewrote it as version 2, which loads the same
    assert json.loads((tmp_path / METADATA_FILE).read_text())["version"] == 2
    again = EmbeddedStore(tmp_path, broker_id=0)
    assert again.topics() == store.topics()
    assert again.allocate_producer_ids(1) == range(2010, 2011)


def test_unknown_or_torn_files_are_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / METADATA_FILE
    path.write_text('{"version": 9, "cluster_id": "x", "topics": []}')
    with pytest.raises(MalformedZNode, match="unknown metadata file version 9"):
        EmbeddedStore(tmp_path, broker_id=0)
    path.write_text('{"version": 1, "cluster_id": "x", "topics": [{"name": "t"}]}')
    with pytest.raises(MalformedZNode, match=str(path)):
        EmbeddedStore(tmp_path, broker_id=0)


def test_a_leftover_temporary_file_is_ignored(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, broker_id=0)
    store.create_topic("kept", 1, 1, {})
    # a crash between writing the temporary file and the rename leaves it behind
    (tmp_path / METADATA_FILE).with_suffix(".tmp").write_text('{"version": 2, "torn')
    assert set(EmbeddedStore(tmp_path, broker_id=0).topics()) == {"kept"}


def test_backend_state_survives_reopen(tmp_path: Path) -> None:
    async def main() -> None:
        backend = EmbeddedBackend(tmp_path, broker_id=0)
        await backend.start()
        lease = await backend.try_elect_controller(0)
        assert lease is not None and lease.epoch == 1
        topic = TopicAssignment(name="t", topic_id=uuid.uuid4(), partitions={0: [0], 1: [0]})
        await backend.create_topic(topic, {"segment.bytes": "1048576"}, lease)
        state = LeaderAndIsr(controller_epoch=1, leader=0, leader_epoch=0, isr=[0])
        await backend.create_partition_states("t", {0: state}, lease)
        await backend.update_partition_state("t", 0, state, 0, lease)
        await backend.request_topic_deletion("t")
        await backend.close()

        again = EmbeddedBackend(tmp_path, broker_id=0)
        await again.start()
        assert await again.topic_assignments() == {"t": topic}
        assert await again.topic_configs("t") == {"segment.bytes": "1048576"}
        # versions live in memory: a restarted node starts them again
        assert await again.partition_states("t") == {0: VersionedState(state, 0)}
        assert await again.topics_pending_deletion() == {"t"}
        assert await again.controller_id() is None  # the controller seat is not persisted
        relected = await again.try_elect_controller(0)
        assert relected is not None and relected.epoch == 2  # the epoch is
        await again.close()

    anyio.run(main)


def test_old_sync_calls_fire_the_new_watches(tmp_path: Path) -> None:
    async def main() -> None:
        store = EmbeddedStore(tmp_path, broker_id=0)
        backend = store.backend
        await backend.start()
        topics: list[dict[str, TopicAssignment]] = []
        configs: list[tuple[str, dict[str, str]]] = []
        await backend.watch_topics(topics.append)
        await backend.watch_topic_configs(lambda name, cfg: configs.append((name, cfg)))
        store.create_topic("legacy", 1, 1, {})
        store.add_partitions("legacy", 3)
        store.set_topic_configs("legacy", {"retention.ms": "1"})
        await backend.settle()
        assert len(topics[-1]["legacy"].partitions) == 3
        assert configs == [("legacy", {"retention.ms": "1"})]
        states = await backend.partition_states("legacy")
        assert sorted(states) == [0, 1, 2] and states[2].state.leader == 0
        store.delete_topic("legacy")
        await backend.settle()
        assert topics[-1] == {}
        await backend.close()

    anyio.run(main)
