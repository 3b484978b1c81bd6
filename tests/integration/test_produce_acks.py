"""Produce with acks=0, acks=1 and acks=all."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from kafka import KafkaProducer

from . import rawclient
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

N = 50


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_acks(broker: Broker, topic_name: str, acks: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    p = producer(broker.bootstrap, acks=acks, linger_ms=5)
    recs = [{"key": f"k{i}".encode(), "value": f"acks-{acks}-{i}".encode(), "partition": 0}
            for i in range(N)]
    assert_delivered(produce_all(p, topic_name, recs))
    # acks=0 is fire and forget: the data must still arrive
    got = consume_confluent(broker.bootstrap, topic_name, N)
    assert [g.value for g in got] == [r["value"] for r in recs]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_kafka_python_acks(broker: Broker, topic_name: str, acks: int | str) -> None:
    create_topic(broker.bootstrap, topic_name)
    # kafka-python 3 turns idempotence on for acks=all; that is tested on its own elsewhere
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, linger_ms=5,
                      request_timeout_ms=10000, enable_idempotence=False)
    try:
        futs = [p.send(topic_name, value=f"kp-{i}".encode(), partition=0) for i in range(N)]
        p.flush(timeout=OP_TIMEOUT_S)
        metas = [f.get(timeout=OP_TIMEOUT_S) for f in futs]
    finally:
        p.close(timeout=5)
    if acks != 0:
        assert [m.offset for m in metas] == list(range(N))
    got = consume_confluent(broker.bootstrap, topic_name, N)
    assert [g.value for g in got] == [f"kp-{i}".encode() for i in range(N)]


def test_raw_acks0_sends_no_response(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with rawclient.RawClient(broker.bootstrap) as rc:
        batch = rawclient.build_batch([rawclient.Rec(b"fire-and-forget")])
        rc.send(rawclient.API_PRODUCE, 3, rawclient.produce_body_v3(topic_name, 0, batch, acks=0),
                correlation_id=100)
        rc.send(rawclient.API_VERSIONS, 0, b"", correlation_id=101)
        corr, _ = rc.recv()
        assert corr == 101, "acks=0 produce must not be answered"
        assert rc.high_watermark(topic_name) == 1
