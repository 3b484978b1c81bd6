"""Watermarks, ListOffsets and offsets-for-times with CreateTime timestamps."""

from __future__ import annotations

from typing import TYPE_CHECKING

import time

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KPTopicPartition

from . import rawclient
from .helpers import (
    OP_TIMEOUT_S,
    assert_delivered,
    consume_confluent,
    consumer,
    create_topic,
    produce_all,
    producer,
    watermarks,
)

N = 10
STEP_MS = 1000

if TYPE_CHECKING:
    from conftest import Broker


def produce_timestamped(bootstrap: str, topic: str, timestamps: list[int],
                        partition: int = 0) -> None:
    p = producer(bootstrap, linger_ms=0)
    recs = [{"value": f"v{i}".encode(), "key": f"k{i}".encode(), "timestamp": ts,
             "partition": partition} for i, ts in enumerate(timestamps)]
    reports = produce_all(p, topic, recs)
    assert_delivered(reports)
    assert [m.offset() for m in reports] == list(range(len(timestamps)))


def base_ts() -> int:
    return int(time.time() * 1000) - 60_000


def test_watermarks_empty_and_after_produce(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)
    produce_timestamped(broker.bootstrap, topic_name, [base_ts() + i for i in range(N)])
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, N)
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 0)


def test_kafka_python_beginning_end_offsets(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    produce_timestamped(broker.bootstrap, topic_name, [base_ts() + i for i in range(N)])
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                      enable_auto_commit=False, request_timeout_ms=11000)
    try:
        tps = [KPTopicPartition(topic_name, 0), KPTopicPartition(topic_name, 1)]
        assert c.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert c.end_offsets(tps) == {tps[0]: N, tps[1]: 0}
    finally:
        c.close()


def test_create_time_timestamps_preserved(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    t0 = base_ts()
    stamps = [t0 + i * STEP_MS for i in range(N)]
    produce_timestamped(broker.bootstrap, topic_name, stamps)
    c = consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + OP_TIMEOUT_S
        while len(seen) < N and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            seen.append(m.timestamp())
    finally:
        c.close()
    assert seen == [(TIMESTAMP_CREATE_TIME, ts) for ts in stamps]


def test_confluent_offsets_for_times(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    t0 = base_ts()
    produce_timestamped(broker.bootstrap, topic_name, [t0 + i * STEP_MS for i in range(N)])
    c = consumer(broker.bootstrap)
    try:
        def lookup(ts: int) -> int:
            [res] = c.offsets_for_times([TopicPartition(topic_name, 0, ts)],
                                        timeout=OP_TIMEOUT_S)
            assert res.error is None, res.error
            return int(res.offset)

        assert lookup(t0 - 10_000) == 0
        assert lookup(t0) == 0
        assert lookup(t0 + 1) == 1
        assert lookup(t0 + 3 * STEP_MS + STEP_MS // 2) == 4
        assert lookup(t0 + (N - 1) * STEP_MS) == N - 1
        assert lookup(t0 + N * STEP_MS) == -1  # after the last record: no offset
    finally:
        c.close()


def test_kafka_python_offsets_for_times(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    t0 = base_ts()
    produce_timestamped(broker.bootstrap, topic_name, [t0 + i * STEP_MS for i in range(N)])
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                      enable_auto_commit=False, request_timeout_ms=11000)
    try:
        tp = KPTopicPartition(topic_name, 0)
        res = c.offsets_for_times({tp: t0 + 2 * STEP_MS})[tp]
        assert res is not None
        assert (res.offset, res.timestamp) == (2, t0 + 2 * STEP_MS)
        res = c.offsets_for_times({tp: t0 + 2 * STEP_MS + 1})[tp]
        assert res is not None
        assert (res.offset, res.timestamp) == (3, t0 + 3 * STEP_MS)
        assert c.offsets_for_times({tp: t0 + N * STEP_MS})[tp] is None
    finally:
        c.close()


def test_offsets_for_times_out_of_order_timestamps(broker: Broker, topic_name: str) -> None:
    """The first offset whose timestamp is >= the target (Kafka semantics)."""
    create_topic(broker.bootstrap, topic_name)
    t0 = base_ts()
    produce_timestamped(broker.bootstrap, topic_name,
                        [t0 + 1000, t0 + 3000, t0 + 2000, t0 + 4000])
    c = consumer(broker.bootstrap)
    try:
        [res] = c.offsets_for_times([TopicPartition(topic_name, 0, t0 + 2500)],
                                    timeout=OP_TIMEOUT_S)
        assert res.offset == 1
    finally:
        c.close()
    got = consume_confluent(broker.bootstrap, topic_name, 4)
    assert [g.timestamp for g in got] == [t0 + 1000, t0 + 3000, t0 + 2000, t0 + 4000]


def test_raw_list_offsets_earliest_latest(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    produce_timestamped(broker.bootstrap, topic_name, [base_ts() + i for i in range(3)])
    with rawclient.RawClient(broker.bootstrap) as rc:
        assert rc.list_offsets(topic_name, 0, -2)[::2] == (0, 0)
        assert rc.list_offsets(topic_name, 0, -1)[::2] == (0, 3)
        err, _, _ = rc.list_offsets(topic_name, 9, -1)
        assert err == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_log_append_time_topic(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name,
                 config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce_timestamped(broker.bootstrap, topic_name, [1_000_000 + i for i in range(3)])
    after = int(time.time() * 1000)
    c = consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        stamps: list[tuple[int, int]] = []
        deadline = time.monotonic() + OP_TIMEOUT_S
        while len(stamps) < 3 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                stamps.append(m.timestamp())
    finally:
        c.close()
    assert len(stamps) == 3
    for ts_type, ts in stamps:
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= ts <= after + 1000, (before, ts, after)
