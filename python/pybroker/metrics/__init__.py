"""Broker metrics: the counters the request path bumps, and their Prometheus view.

`BrokerMetrics` is plain state: dicts and ints that handlers increment with one
statement per batch or request (no locks: the broker is one event loop thread,
no per-record work). Gauges that can be read off the broker (log sizes,
under-replicated partitions, open connections) are computed when scraped, by
`pybroker.metrics.exposition`. `pybroker.metrics.http` serves them on
`metrics.port` (0, the default, turns the endpoint off)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pybroker.errors import ErrorCode

#: upper bounds (seconds) of the request latency histogram buckets; +Inf is implied
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)

#: (group, topic, partition, lag) rows; a group coordinator registers a source of them
LagRows = Iterable[tuple[str, str, int, int]]


class RequestStats:
    """Count and latency histogram of one API's requests."""

    __slots__ = ("count", "seconds_sum", "buckets")

    def __init__(self) -> None:
        self.count = 0
        self.seconds_sum = 0.0
        # one slot per bucket plus +Inf; cumulated only when exposed
        self.buckets = [0] * (len(LATENCY_BUCKETS_S) + 1)

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.seconds_sum += seconds
        self.buckets[bisect_left(LATENCY_BUCKETS_S, seconds)] += 1


class BrokerMetrics:
    """Counters of one broker. Every method is O(1) or O(partitions in a response)."""

    def __init__(self) -> None:
        #: topic -> bytes of record batches appended (produce)
        self.bytes_in: dict[str, int] = {}
        #: topic -> bytes of record batches sent in fetch responses
        self.bytes_out: dict[str, int] = {}
        #: topic -> records appended (AppendResult.record_count, counted per batch)
        self.messages_in: dict[str, int] = {}
        #: API key -> request count and latency
        self.requests: dict[int, RequestStats] = {}
        #: long-polling fetches waiting for data / acks=all produces waiting for replicas
        self.connections_open = 0
        self.connections_total = 0
        #: bumped by replication when it shrinks / expands an ISR (always 0 on one node)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._lag_sources: list[Callable[[], LagRows]] = []
        #: security (issue 16): authentications, denied operations, quota throttling
        self.authentications_succeeded = 0
        self.authentications_failed = 0
        self.authorizations_failed = 0
        #: (quota type, milliseconds of throttle imposed)
        self.throttle_ms: dict[str, int] = {}
        #: error name -> partitions answered with it in Fetch responses (what Kafka's
        #: ErrorsPerSec,request=Fetch counts: a response's partition errors)
        self.fetch_errors: dict[str, int] = {}

    # --- hooks on the request path ---
    def record_produce(self, topic: str, size_bytes: int, record_count: int) -> None:
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size_bytes
        self.messages_in[topic] = self.messages_in.get(topic, 0) + record_count

    def record_fetch(self, responses: Sequence[Mapping[str, Any]]) -> None:
        """Count the record bytes of a Fetch response body's `responses`."""
        out = self.bytes_out
        for topic in responses:
            size = 0
            for p in topic["partitions"]:
                size += len(p["records"])
            if size:
                name = topic["topic"]
                out[name] = out.get(name, 0) + size

    def record_fetch_errors(self, responses: Sequence[Mapping[str, Any]]) -> None:
        """Count the partition errors of a Fetch response body's `responses`."""
        counts = self.fetch_errors
        for topic in responses:
            for p in topic["partitions"]:
                code = p["error_code"]
                if code:
                    try:
                        name = ErrorCode(code).name
                    except ValueError:  # a code this broker has no name for
                        name = str(code)
                    counts[name] = counts.get(name, 0) + 1

    def observe_request(self, api_key: int, seconds: float) -> None:
        stats = self.requests.get(api_key)
        if stats is None:
            stats = self.requests[api_key] = RequestStats()
        stats.observe(seconds)

    def connection_opened(self) -> None:
        self.connections_open += 1
        self.connections_total += 1

    def connection_closed(self) -> None:
        self.connections_open -= 1

    def authentication_succeeded(self) -> None:
        self.authentications_succeeded += 1

    def authentication_failed(self) -> None:
        self.authentications_failed += 1

    def authorization_failed(self) -> None:
        self.authorizations_failed += 1

    def throttled(self, quota_type: str, ms: int) -> None:
        self.throttle_ms[quota_type] = self.throttle_ms.get(quota_type, 0) + ms

    # --- consumer group lag ---
    def add_lag_source(self, source: Callable[[], LagRows]) -> None:
        """Register a function giving (group, topic, partition, lag) rows at scrape time
        (the group coordinator's hook)."""
        self._lag_sources.append(source)

    def lag_rows(self) -> list[tuple[str, str, int, int]]:
        rows: list[tuple[str, str, int, int]] = []
        for source in self._lag_sources:
            rows.extend(source())
        return rows
