"""Scrape a live broker's metrics.port and watch the counters move."""

from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerFactory, free_port

parser = pytest.importorskip("prometheus_client.parser")

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    out: Samples = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_endpoint_counts_produce_fetch_and_logs(broker_factory: BrokerFactory) -> None:
    port = free_port()
    b = broker_factory(metrics_port=port)
    before = scrape(port)
    assert before[("pybroker_under_replicated_partitions", ())] == 0
    assert before[("pybroker_isr_shrinks_total", ())] == 0
    assert before[("pybroker_isr_expands_total", ())] == 0

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("m", num_partitions=2, replication_factor=1)])["m"].result(10)
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
    for i in range(100):
        producer.produce("m", value=b"v" * 50, partition=i % 2)
    assert producer.flush(10) == 0

    after = scrape(port)
    topic = (("topic", "m"),)
    assert after[("pybroker_topic_messages_in_total", topic)] == 100
    bytes_in = after[("pybroker_topic_bytes_in_total", topic)]
    assert bytes_in > 100 * 50
    sizes = [after[("pybroker_log_size_bytes", (("partition", str(p)), ("topic", "m")))]
             for p in (0, 1)]
    assert sum(sizes) == bytes_in
    assert after[("pybroker_log_segments", (("partition", "0"), ("topic", "m")))] == 1
    produce = (("api", "Produce"),)
    assert after[("pybroker_requests_total", produce)] >= 2
    assert after[("pybroker_request_duration_seconds_count", produce)] == \
        after[("pybroker_requests_total", produce)]
    assert after[("pybroker_request_duration_seconds_bucket",
                  (("api", "Produce"), ("le", "+Inf")))] == after[
        ("pybroker_requests_total", produce)]
    assert after[("pybroker_requests_total", (("api", "CreateTopics"),))] == 1

    # a consumer reads everything back: bytes out == bytes in; while it long-polls the
    # (then idle) topic, its fetches sit in purgatory and its connection is open
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "metrics-test",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 2000})
    consumer.assign([TopicPartition("m", p, 0) for p in (0, 1)])
    got = 0
    deadline = time.monotonic() + 15
    while got < 100 and time.monotonic() < deadline:
        got += sum(1 for msg in consumer.consume(100, 0.5) if msg.error() is None)
    assert got == 100
    # librdkafka's fetcher thread keeps long-polling the (now idle) partitions by itself
    try:
        waiting = 0.0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            during = scrape(port)
            waiting = during[("pybroker_purgatory_size", (("operation", "fetch"),))]
            if waiting >= 1:
                break
            time.sleep(0.1)
        assert waiting >= 1
        assert during[("pybroker_connections", ())] >= 1
        assert during[("pybroker_topic_bytes_out_total", topic)] == bytes_in
    finally:
        consumer.close()
    assert scrape(port)[("pybroker_connections_opened_total", ())] >= 2


def test_metrics_endpoint_is_off_by_default(broker_factory: BrokerFactory) -> None:
    port = free_port()
    broker_factory()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_consumer_group_lag_from_committed_offsets(broker_factory: BrokerFactory) -> None:
    port = free_port()
    b = broker_factory(metrics_port=port)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("lag", num_partitions=1, replication_factor=1)])[
        "lag"].result(10)
    producer = Producer({"bootstrap.servers": b.bootstrap})
    for _ in range(10):
        producer.produce("lag", value=b"x", partition=0)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "lagging",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("lag", 0, 4)], asynchronous=False)
    finally:
        consumer.close()
    got = scrape(port)
    assert got[("pybroker_consumer_group_lag",
                (("group", "lagging"), ("partition", "0"), ("topic", "lag")))] == 6
