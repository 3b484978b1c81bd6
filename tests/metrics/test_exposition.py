"""The exposition text, parsed back with prometheus_client's parser."""

from __future__ import annotations

import pytest

from pybroker.metrics import LATENCY_BUCKETS_S, BrokerMetrics
from pybroker.metrics.exposition import escape_label, render
from pybroker.metrics.http import answer
from pybroker.purgatory import Purgatory

parser = pytest.importorskip("prometheus_client.parser")


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_counters_and_histogram_round_trip() -> None:
    m = BrokerMetrics()
    m.record_produce("orders", 1000, 10)
    m.record_produce("orders", 500, 5)
    m.record_fetch([{"topic": "orders", "partitions": [{"records": b"x" * 700},
                                                       {"records": b""}]}])
    m.observe_request(0, 0.0004)
    m.observe_request(0, 0.003)
    m.observe_request(0, 99.0)
    m.observe_request(1, 0.2)
    m.connection_opened()
    m.connection_opened()
    m.connection_closed()
    text = render(m)
    fams = families(text)
    assert fams["pybroker_topic_messages_in"].type == "counter"  # type: ignore[attr-defined]
    assert fams["pybroker_request_duration_seconds"].type == "histogram"  # type: ignore[attr-defined]
    got = samples(text)
    assert got[("pybroker_topic_bytes_in_total", (("topic", "orders"),))] == 1500
    assert got[("pybroker_topic_messages_in_total", (("topic", "orders"),))] == 15
    assert got[("pybroker_topic_bytes_out_total", (("topic", "orders"),))] == 700
    assert got[("pybroker_requests_total", (("api", "Produce"),))] == 3
    assert got[("pybroker_requests_total", (("api", "Fetch"),))] == 1
    produce = (("api", "Produce"),)
    assert got[("pybroker_request_duration_seconds_count", produce)] == 3
    assert got[("pybroker_request_duration_seconds_sum", produce)] == pytest.approx(99.0034)
    buckets = {labels: v for (name, labels), v in got.items()
               if name == "pybroker_request_duration_seconds_bucket"
               and ("api", "Produce") in labels}
    assert len(buckets) == len(LATENCY_BUCKETS_S) + 1
    assert buckets[(("api", "Produce"), ("le", "0.0005"))] == 1
    assert buckets[(("api", "Produce"), ("le", "0.005"))] == 2
    assert buckets[(("api", "Produce"), ("le", "10.0"))] == 2
    assert buckets[(("api", "Produce"), ("le", "+Inf"))] == 3
    assert got[("pybroker_connections", ())] == 1
    assert got[("pybroker_connections_opened_total", ())] == 2
    assert got[("pybroker_purgatory_size", (("operation", "fetch"),))] == 0
    assert got[("pybroker_isr_shrinks_total", ())] == 0


def test_consumer_group_lag_hook() -> None:
    m = BrokerMetrics()
    text = render(m)
    assert "pybroker_consumer_group_lag" in families(text)
    m.add_lag_source(lambda: [("g1", "orders", 0, 7), ("g1", "orders", 1, 0)])
    got = samples(render(m))
    assert got[("pybroker_consumer_group_lag",
                (("group", "g1"), ("partition", "0"), ("topic", "orders")))] == 7


def test_label_values_are_escaped() -> None:
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    m = BrokerMetrics()
    m.add_lag_source(lambda: [('we"ird\\group', "t", 0, 1)])
    got = samples(render(m))
    assert any(('group', 'we"ird\\group') in labels for _, labels in got)


class _FakeReplicas:
    partitions: dict[tuple[str, int], object] = {}


class _FakeLogs:
    partitions: dict[tuple[str, int], object] = {}


class _FakeBroker:
    """The parts of a BrokerContext the exposition reads, empty."""

    def __init__(self) -> None:
        self.metrics = BrokerMetrics()
        self.purgatory = Purgatory()
        self.replicas = _FakeReplicas()
        self.logs = _FakeLogs()


def test_http_answers() -> None:
    broker = _FakeBroker()
    ok = answer(broker, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # type: ignore[arg-type]
    head, _, body = ok.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert b"Content-Type: text/plain; version=0.0.4" in head
    assert f"Content-Length: {len(body)}".encode() in head
    assert b"pybroker_requests_total" in body
    assert answer(broker, b"GET /nope HTTP/1.1\r\n\r\n").startswith(  # type: ignore[arg-type]
        b"HTTP/1.1 404")
    assert answer(broker, b"POST /metrics HTTP/1.1\r\n\r\n").startswith(  # type: ignore[arg-type]
        b"HTTP/1.1 405")
    assert answer(broker, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400")  # type: ignore[arg-type]
