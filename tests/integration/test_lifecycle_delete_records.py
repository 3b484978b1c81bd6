"""DeleteRecords (21): the log start offset moves, fetches below it are out of
range, whole segments below it go, and the new start survives kill -9."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from confluent_kafka import KafkaException, TopicPartition

from .helpers import (
    OP_TIMEOUT_S,
    admin,
    assert_delivered,
    consume_confluent,
    create_topic,
    produce_all,
    producer,
    watermarks,
)

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory


def fill(b: Broker, topic: str, count: int, size: int = 10) -> list[bytes]:
    values = [b"%04d" % i + b"." * size for i in range(count)]
    p = producer(b.bootstrap, linger_ms=0, batch_num_messages=1)
    assert_delivered(produce_all(p, topic, [{"value": v} for v in values]))
    return values


def delete_records(bootstrap: str, topic: str, offset: int) -> int:
    tp = TopicPartition(topic, 0, offset)
    a = admin(bootstrap)  # keep the client alive while its future is pending
    fut = a.delete_records([tp], request_timeout=OP_TIMEOUT_S)
    return int(fut[tp].result(timeout=OP_TIMEOUT_S).low_watermark)


def test_delete_records_moves_log_start(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    values = fill(b, topic_name, 20)
    assert delete_records(b.bootstrap, topic_name, 7) == 7
    assert watermarks(b.bootstrap, topic_name) == (7, 20)
    got = consume_confluent(b.bootstrap, topic_name, 13, offset=0)  # earliest -> 7
    assert [(g.offset, g.value) for g in got] == [(i, values[i]) for i in range(7, 20)]
    # a lower offset is a no-op; -1 is the high watermark
    assert delete_records(b.bootstrap, topic_name, 3) == 7
    assert delete_records(b.bootstrap, topic_name, -1) == 20
    assert watermarks(b.bootstrap, topic_name) == (20, 20)


def test_beyond_high_watermark_is_out_of_range(broker_factory: BrokerFactory,
                                               topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    fill(b, topic_name, 5)
    with pytest.raises(KafkaException) as info:
        delete_records(b.bootstrap, topic_name, 6)
    assert info.value.args[0].code() == 1  # OFFSET_OUT_OF_RANGE
    assert watermarks(b.bootstrap, topic_name) == (0, 5)


def test_compacted_topic_refuses(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    p = producer(b.bootstrap)
    assert_delivered(produce_all(p, topic_name, [{"key": b"k", "value": b"v"}] * 3))
    with pytest.raises(KafkaException) as info:
        delete_records(b.bootstrap, topic_name, 2)
    assert info.value.args[0].code() == 44  # POLICY_VIOLATION


def test_deletes_segments_and_survives_kill(broker_factory: BrokerFactory,
                                            topic_name: str) -> None:
    b = broker_factory(log_segment_bytes=1000)
    create_topic(b.bootstrap, topic_name)
    values = fill(b, topic_name, 40, size=100)
    part = b.data_dir / f"{topic_name}-0"
    before = sorted(part.glob("*.log"))
    assert len(before) >= 4
    assert delete_records(b.bootstrap, topic_name, 25) == 25
    after = sorted(part.glob("*.log"))
    bases = [int(p.name[:20]) for p in after]
    assert bases[0] <= 25 and (len(bases) == 1 or bases[1] > 25)
    assert len(after) < len(before)
    assert (b.data_dir / "log-start-offset-checkpoint").read_text().splitlines()[2:] == [
        f"{topic_name} 0 25"]
    b.kill()
    b.start()
    assert watermarks(b.bootstrap, topic_name) == (25, 40)
    got = consume_confluent(b.bootstrap, topic_name, 15, offset=0)
    assert [(g.offset, g.value) for g in got] == [(i, values[i]) for i in range(25, 40)]


def test_kafka_python_delete_records(broker_factory: BrokerFactory, topic_name: str) -> None:
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    fill(b, topic_name, 10)
    client = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
    try:
        result = client.delete_records({KTopicPartition(topic_name, 0): 4})
        meta = result[KTopicPartition(topic_name, 0)]
        low = meta["low_watermark"] if isinstance(meta, dict) else meta.low_watermark
        assert low == 4
    finally:
        client.close()
    assert watermarks(b.bootstrap, topic_name) == (4, 10)
