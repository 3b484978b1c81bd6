"""Fetch semantics: long poll, idle wait, OFFSET_OUT_OF_RANGE, mid-batch offsets, segments."""

from __future__ import annotations

from typing import TYPE_CHECKING

import threading
import time

import pytest
from confluent_kafka import KafkaError, TopicPartition

from . import rawclient
from .helpers import (
    OP_TIMEOUT_S,
    assert_delivered,
    consume_confluent,
    consumer,
    create_topic,
    produce_all,
    producer,
)

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory


def test_idle_fetch_waits_max_wait(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with rawclient.RawClient(broker.bootstrap) as rc:
        t = time.monotonic()
        part = rc.fetch(topic_name, 0, 0, max_wait_ms=500, min_bytes=1)
        elapsed = time.monotonic() - t
    assert part.error_code == 0
    assert part.records == b""
    assert part.high_watermark == 0
    assert 0.4 <= elapsed < 3.0, f"idle fetch returned after {elapsed:.3f}s (max_wait 500 ms)"


def test_long_poll_wakes_on_produce(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    produced_at: list[float] = []

    def produce_later() -> None:
        time.sleep(0.5)
        with rawclient.RawClient(broker.bootstrap) as prc:
            produced_at.append(time.monotonic())
            assert prc.produce(topic_name, 0, rawclient.build_batch(
                [rawclient.Rec(b"wake")]), acks=1).error_code == 0

    th = threading.Thread(target=produce_later)
    with rawclient.RawClient(broker.bootstrap) as rc:
        th.start()
        part = rc.fetch(topic_name, 0, 0, max_wait_ms=8000, min_bytes=1)
        done = time.monotonic()
    th.join()
    assert part.error_code == 0
    assert rawclient.iter_batches(part.records), "long poll returned without the record"
    assert produced_at and done - produced_at[0] < 2.0, "fetch not woken promptly by produce"


def test_confluent_consumer_gets_record_promptly(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    c = consumer(broker.bootstrap, fetch_wait_max_ms=5000)
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        c.poll(1.0)  # let the fetcher start its long poll
        p = producer(broker.bootstrap, linger_ms=0)
        t = time.monotonic()
        assert_delivered(produce_all(p, topic_name, [{"value": b"hello", "partition": 0}]))
        msg = None
        while time.monotonic() - t < OP_TIMEOUT_S:
            msg = c.poll(0.1)
            if msg is not None and not msg.error():
                break
        latency = time.monotonic() - t
        assert msg is not None and msg.value() == b"hello"
        assert latency < 2.5, f"record took {latency:.2f}s with fetch.wait.max.ms=5000"
    finally:
        c.close()


def test_min_bytes_zero_returns_immediately(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with rawclient.RawClient(broker.bootstrap) as rc:
        t = time.monotonic()
        part = rc.fetch(topic_name, 0, 0, max_wait_ms=5000, min_bytes=0)
        assert part.error_code == 0
        assert time.monotonic() - t < 2.0


def test_raw_fetch_offset_out_of_range(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    assert_delivered(produce_all(producer(broker.bootstrap), topic_name,
                                 [{"value": b"a", "partition": 0}] * 3))
    with rawclient.RawClient(broker.bootstrap) as rc:
        part = rc.fetch(topic_name, 0, 100, max_wait_ms=100)
        assert part.error_code == 1  # OFFSET_OUT_OF_RANGE
        assert part.records == b""
        assert rc.fetch(topic_name, 0, -5, max_wait_ms=100).error_code == 1
        # at the log end: not an error, just nothing yet
        at_end = rc.fetch(topic_name, 0, 3, max_wait_ms=100)
        assert at_end.error_code == 0 and at_end.high_watermark == 3
        assert rc.fetch(topic_name, 7, 0, max_wait_ms=100).error_code == 3


def test_confluent_offset_reset_error(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    assert_delivered(produce_all(producer(broker.bootstrap), topic_name,
                                 [{"value": b"a", "partition": 0}] * 3))
    c = consumer(broker.bootstrap, auto_offset_reset="error")
    try:
        c.assign([TopicPartition(topic_name, 0, 50)])
        deadline = time.monotonic() + OP_TIMEOUT_S
        err = None
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error():
                err = m.error()
                break
            assert m is None, f"unexpected record at offset {m.offset()}"
        assert err is not None, "no error for fetch beyond the log end"
        assert err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE), err
    finally:
        c.close()


def test_consume_from_middle_of_batch(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with rawclient.RawClient(broker.bootstrap) as rc:
        batch = rawclient.build_batch([rawclient.Rec(f"m{i}".encode()) for i in range(10)],
                                      compression=1)
        assert rc.produce(topic_name, 0, batch).error_code == 0
    got = consume_confluent(broker.bootstrap, topic_name, 5, offset=5)
    assert [(g.offset, g.value) for g in got] == [(i, f"m{i}".encode()) for i in range(5, 10)]


@pytest.mark.parametrize("start", [0, 57])
def test_fetch_across_segments(broker_factory: BrokerFactory, topic_name: str,
                               start: int) -> None:
    b = broker_factory(log_segment_bytes=4096)
    create_topic(b.bootstrap, topic_name)
    p = producer(b.bootstrap, linger_ms=0)
    n = 120
    for chunk in range(0, n, 10):  # many small batches -> several segments
        assert_delivered(produce_all(p, topic_name, [
            {"value": f"{i:05d}".encode() * 20, "partition": 0} for i in range(chunk, chunk + 10)
        ]))
    logs = sorted((b.data_dir / f"{topic_name}-0").glob("*.log"))
    assert len(logs) > 1, f"expected several segments with log.segment.bytes=4096: {logs}"
    got = consume_confluent(b.bootstrap, topic_name, n - start, offset=start)
    assert [g.offset for g in got] == list(range(start, n))
    assert [g.value for g in got] == [f"{i:05d}".encode() * 20 for i in range(start, n)]
