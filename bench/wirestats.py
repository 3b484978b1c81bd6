"""Structural counters of one bench phase, from the client's own statistics (issue 18).

librdkafka counts, per broker connection, the requests it sent by API ("req"), the
requests/responses and their bytes ("tx"/"txbytes", "rx"/"rxbytes"), and per topic the
batches it built ("batchcnt": records per batch, "batchsize": bytes per batch, windows
reset at each report). Reading them through `stats_cb` costs one JSON report per
`statistics.interval.ms` and puts nothing between client and broker, so the figures
are the same kind for any broker and do not depend on how loaded the machine is:
produce requests and records per request, fetch responses and records/bytes per
response, round trips per GB, client CPU per record.

Use: `stats = WireStats()`, merge `stats.config()` into the client's config, call
`stats.start()` when the clock starts and `stats.stop(client)` when it stops (it polls
the client until a report newer than the stop arrives), then `stats.figures(...)`."""

from __future__ import annotations

import json
import os
import time
from typing import Any

#: one report per second: cheap (a JSON document per second), and stop() waits at most this
INTERVAL_MS = 1000


class WireStats:
    def __init__(self, interval_ms: int = INTERVAL_MS) -> None:
        self.interval_ms = interval_ms
        self.reports = 0
        self.last: dict[str, Any] | None = None
        self.first: dict[str, Any] | None = None
        #: sums over every report's windows: (sum of averages x counts, counts)
        self.windows: dict[str, list[float]] = {}
        self._cpu0: os.times_result | None = None
        self._cpu1: os.times_result | None = None
        #: CPU seconds of the thread that runs the produce/consume loop (time.thread_time)
        self._main0: float | None = None
        self._main1: float | None = None
        #: produce() calls refused with a full client queue (the producer waited for acks)
        self.queue_full = 0

    def config(self) -> dict[str, Any]:
        return {"statistics.interval.ms": self.interval_ms, "stats_cb": self._on_stats}

    def _on_stats(self, raw: str) -> None:
        doc = json.loads(raw)
        self.reports += 1
        self.last = doc
        for broker in doc.get("brokers", {}).values():
            self._window("rtt_us", broker.get("rtt"))
        for topic in doc.get("topics", {}).values():
            self._window("batch_records", topic.get("batchcnt"))
            self._window("batch_bytes", topic.get("batchsize"))

    def _window(self, name: str, window: dict[str, Any] | None) -> None:
        if not window or not window.get("cnt"):
            return
        acc = self.windows.setdefault(name, [0.0, 0.0])
        acc[0] += window["avg"] * window["cnt"]
        acc[1] += window["cnt"]

    def start(self, client: Any) -> None:
        """Baseline: the counters of a report taken before the clock starts."""
        self._wait_report(client)
        self.first = self.last
        self.windows.clear()
        self._cpu0 = os.times()
        self._main0 = time.thread_time()

    def stop(self, client: Any) -> None:
        self._cpu1 = os.times()
        self._main1 = time.thread_time()
        self._wait_report(client)

    def _wait_report(self, client: Any) -> None:
        seen = self.reports
        deadline = time.monotonic() + 3 * self.interval_ms / 1000 + 1
        while self.reports == seen and time.monotonic() < deadline:
            client.poll(0.05)

    @staticmethod
    def _totals(doc: dict[str, Any] | None) -> dict[str, int]:
        out: dict[str, int] = {"tx": 0, "txbytes": 0, "rx": 0, "rxbytes": 0,
                               "Produce": 0, "Fetch": 0}
        if doc is None:
            return out
        for broker in doc.get("brokers", {}).values():
            for key in ("tx", "txbytes", "rx", "rxbytes"):
                out[key] += int(broker.get(key, 0))
            for api, n in (broker.get("req") or {}).items():
                if api in out:
                    out[api] += int(n)
        return out

    def figures(self, records: int, payload_bytes: int, seconds: float) -> dict[str, Any]:
        a, b = self._totals(self.first), self._totals(self.last)
        d = {k: b[k] - a[k] for k in b}
        gb = payload_bytes / 1e9
        out: dict[str, Any] = {
            "requests": d["tx"],
            "round_trips_per_gb": d["tx"] / gb if gb else None,
            "produce_requests": d["Produce"],
            "fetch_requests": d["Fetch"],
            "client_rx_bytes": d["rxbytes"],
            "client_tx_bytes": d["txbytes"],
        }
        if d["Produce"]:
            out["queue_full_waits"] = self.queue_full
            out["produce_requests_per_s"] = d["Produce"] / seconds
            out["records_per_produce_request"] = records / d["Produce"]
            out["bytes_per_produce_request"] = d["txbytes"] / d["Produce"]
        if d["Fetch"]:
            out["fetch_responses_per_s"] = d["Fetch"] / seconds
            out["records_per_fetch_response"] = records / d["Fetch"]
            out["bytes_per_fetch_response"] = d["rxbytes"] / d["Fetch"]
        for name, (total, count) in self.windows.items():
            out[f"avg_{name}"] = total / count if count else None
        if self._cpu0 is not None and self._cpu1 is not None:
            cpu = ((self._cpu1.user - self._cpu0.user)
                   + (self._cpu1.system - self._cpu0.system))
            out["client_cpu_us_per_record"] = cpu / records * 1e6 if records else None
        if self._main0 is not None and self._main1 is not None and seconds > 0:
            # 1.00: the application's own loop never waited (for the client library or
            # the broker), so no broker could have made this phase faster
            out["client_main_thread_busy"] = (self._main1 - self._main0) / seconds
        return out


#: (label, key, digits) of the rows printed next to the throughput
ROWS = (
    ("produce req/s", "produce_requests_per_s", 0),
    ("records/produce", "records_per_produce_request", 0),
    ("records/batch", "avg_batch_records", 0),
    ("queue-full waits", "queue_full_waits", 0),
    ("fetch resp/s", "fetch_responses_per_s", 0),
    ("records/fetch", "records_per_fetch_response", 0),
    ("KB/fetch", "kb_per_fetch_response", 1),
    ("round trips/GB", "round_trips_per_gb", 0),
    ("avg rtt ms", "avg_rtt_ms", 2),
    ("client us/record", "client_cpu_us_per_record", 3),
    ("client loop busy", "client_main_thread_busy", 2),
)


def derived(fig: dict[str, Any]) -> dict[str, Any]:
    """Unit conversions for the printed rows."""
    out = dict(fig)
    if not fig.get("produce_requests"):
        # a consumer's topic windows are not batches it built
        out.pop("avg_batch_records", None)
        out.pop("avg_batch_bytes", None)
    if fig.get("bytes_per_fetch_response") is not None:
        out["kb_per_fetch_response"] = fig["bytes_per_fetch_response"] / 1e3
    if fig.get("avg_rtt_us") is not None:
        out["avg_rtt_ms"] = fig["avg_rtt_us"] / 1e3
    return out
