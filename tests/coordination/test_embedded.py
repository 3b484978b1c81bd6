from pathlib import Path

import pytest

from pybroker.coordination.base import validate_topic_name
from pybroker.coordination.embedded import EmbeddedStore
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
