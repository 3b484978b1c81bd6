"""message.max.bytes / max.message.bytes enforcement and KIP-74 fetch of oversized batches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from confluent_kafka import KafkaError

from . import rawclient
from .helpers import (
    assert_delivered,
    consume_confluent,
    create_topic,
    produce_all,
    producer,
    watermarks,
)

LIMIT = 10_000

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory


def big_producer(bootstrap: str):  # type: ignore[no-untyped-def]
    # client-side limit far above the broker's, so the broker is the one rejecting
    return producer(bootstrap, message_max_bytes=5_000_000, linger_ms=0,
                    compression_type="none")


def test_broker_message_max_bytes(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(message_max_bytes=LIMIT)
    create_topic(b.bootstrap, topic_name)
    p = big_producer(b.bootstrap)
    [too_big] = produce_all(p, topic_name, [{"value": b"x" * (LIMIT * 2), "partition": 0}])
    err = too_big.error()
    assert err is not None, "oversized record was accepted"
    assert err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
    small = produce_all(p, topic_name, [{"value": b"y" * 100, "partition": 0}] * 3)
    assert_delivered(small)
    assert [m.offset() for m in small] == [0, 1, 2]
    assert watermarks(b.bootstrap, topic_name) == (0, 3)
    got = consume_confluent(b.bootstrap, topic_name, 3)
    assert all(g.value == b"y" * 100 for g in got)


def test_raw_produce_too_large_appends_nothing(broker_factory: BrokerFactory,
                                               topic_name: str) -> None:
    b = broker_factory(message_max_bytes=LIMIT)
    create_topic(b.bootstrap, topic_name)
    with rawclient.RawClient(b.bootstrap) as rc:
        batch = rawclient.build_batch([rawclient.Rec(b"z" * (LIMIT + 500))])
        assert rc.produce(topic_name, 0, batch).error_code == 10  # MESSAGE_TOO_LARGE
        assert rc.high_watermark(topic_name) == 0
        ok = rc.produce(topic_name, 0, rawclient.build_batch([rawclient.Rec(b"ok")]))
        assert (ok.error_code, ok.base_offset) == (0, 0)


def test_topic_max_message_bytes(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, config={"max.message.bytes": "5000"})
    p = big_producer(broker.bootstrap)
    [rejected] = produce_all(p, topic_name, [{"value": b"x" * 8000, "partition": 0}])
    assert rejected.error() is not None
    assert rejected.error().code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert_delivered(produce_all(p, topic_name, [{"value": b"x" * 1000, "partition": 0}]))


def test_fetch_small_max_bytes_returns_first_batch_whole(broker: Broker, topic_name: str) -> None:
    """KIP-74: the first batch is returned even if larger than the fetch limits."""
    create_topic(broker.bootstrap, topic_name)
    value = bytes(range(256)) * 800  # ~200 KB, incompressible-ish, one batch
    with rawclient.RawClient(broker.bootstrap) as rc:
        batch = rawclient.build_batch([rawclient.Rec(value, key=b"big")])
        assert rc.produce(topic_name, 0, batch).error_code == 0
        assert rc.produce(topic_name, 0, rawclient.build_batch(
            [rawclient.Rec(b"small")])).error_code == 0
        part = rc.fetch(topic_name, 0, 0, max_bytes=1024, partition_max_bytes=1024,
                        max_wait_ms=100)
        assert part.error_code == 0
        batches = rawclient.iter_batches(part.records)
        assert batches and batches[0][0] == 0, "first batch not returned whole"
        assert len(part.records) >= len(batch)
    got = consume_confluent(broker.bootstrap, topic_name, 2, fetch_max_bytes=1024,
                            max_partition_fetch_bytes=1024, message_max_bytes=1024,
                            receive_message_max_bytes=1_000_000)
    assert got[0].value == value and got[1].value == b"small"
