"""Idempotent producers (InitProducerId + sequence numbers), the default of Java and
kafka-python 3 clients for acks=all."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka import KafkaProducer

from .helpers import (
    OP_TIMEOUT_S,
    assert_delivered,
    consume_confluent,
    create_topic,
    produce_all,
    producer,
)

if TYPE_CHECKING:
    from conftest import Broker

N = 100


def test_confluent_idempotent_producer(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    p = producer(broker.bootstrap, enable_idempotence=True, linger_ms=5)
    reports = produce_all(p, topic_name, [
        {"value": f"i{i}".encode(), "partition": i % 2} for i in range(N)])
    assert_delivered(reports)
    got = consume_confluent(broker.bootstrap, topic_name, N, partitions=[0, 1])
    assert sorted(g.value or b"" for g in got) == sorted(f"i{i}".encode() for i in range(N))


def test_kafka_python_default_acks_all_producer(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                      request_timeout_ms=10000)  # idempotence on by default
    try:
        futs = [p.send(topic_name, value=f"d{i}".encode(), partition=0) for i in range(N)]
        assert [f.get(timeout=OP_TIMEOUT_S).offset for f in futs] == list(range(N))
    finally:
        p.close(timeout=5)
