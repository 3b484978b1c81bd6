"""MetadataCache.topic_name: the one way a request's topic id becomes a topic."""

from __future__ import annotations

import uuid

import pytest

from pybroker.coordination.base import TopicRecord
from pybroker.metadata.cache import MetadataCache


def test_topic_name_resolves_known_ids_only() -> None:
    cache = MetadataCache("c")
    first = uuid.uuid4()
    cache.update_topic(TopicRecord("t", first, [], {}))
    assert cache.topic_name(first) == "t"
    assert cache.topic_by_id(first) is cache.topic("t")
    assert cache.topic_name(uuid.uuid4()) is None
    # a topic whose id is not known yet (a ZooKeeper topic of Kafka 2.7) is not the zero id's
    cache.update_topic(TopicRecord("legacy", uuid.UUID(int=0), [], {}))
    assert cache.topic_name(uuid.UUID(int=0)) is None
    # re-created under its name: the old id names nothing any more
    second = uuid.uuid4()
    cache.update_topic(TopicRecord("t", second, [], {}))
    assert (cache.topic_name(first), cache.topic_name(second)) == (None, "t")
    cache.remove_topic("t")
    assert cache.topic_name(second) is None


def test_topic_name_refuses_ids_that_are_not_uuids() -> None:
    """The codec gives uuid.UUID; raw bytes here are a bug, not an unknown topic."""
    cache = MetadataCache("c")
    topic_id = uuid.uuid4()
    cache.update_topic(TopicRecord("t", topic_id, [], {}))
    with pytest.raises(TypeError):
        cache.topic_name(topic_id.bytes)  # type: ignore[arg-type]
