"""`pybroker producer-perf-test`: kafka-producer-perf-test.sh (ProducerPerformance).

Sends `--num-records` records of `--record-size` random upper-case bytes (or
lines of `--payload-file`) at most `--throughput` records/s (-1: no limit) and
prints Kafka's lines: every 5 s

    N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.

and at the end

    N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
    P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th.

Latency is send to acknowledgement, as librdkafka measures it per record."""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from pybroker.tools._common import (
    Progress,
    ToolError,
    add_bootstrap,
    bar,
    client_config,
    delivery_error,
    parse_pairs,
    read_properties,
    require_client,
    with_delivery_timeout,
)

COMMAND = "producer-perf-test"
HELP = "measure producer throughput and latency (kafka-producer-perf-test.sh)"

REPORTING_INTERVAL_MS = 5000
#: latencies kept for percentiles (Kafka samples down to this many)
LATENCY_SAMPLES_MAX = 500000
FLUSH_TIMEOUT_S = 300.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="topic to produce to")
    parser.add_argument("--num-records", type=int, required=True, help="records to send")
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int, help="bytes per record")
    size.add_argument("--payload-file", help="file whose lines are sent as payloads")
    parser.add_argument("--payload-delimiter", default="\\n",
                        help="delimiter of --payload-file records (default newline)")
    parser.add_argument("--throughput", type=float, required=True,
                        help="records/s to send at most; -1 for no limit")
    parser.add_argument("--producer-props", nargs="+", action="extend", default=[],
                        metavar="KEY=VALUE", help="producer configs")
    parser.add_argument("--producer.config", "--command-config", dest="producer_config",
                        metavar="FILE",
                        help="producer properties file")
    add_bootstrap(parser)
    # Kafka's interval is fixed at 5 s; tests shorten it
    parser.add_argument("--reporting-interval", type=int, default=REPORTING_INTERVAL_MS,
                        help=argparse.SUPPRESS)


class Stats:
    """Kafka's ProducerPerformance.Stats: totals, a 5 s window, sampled latencies (ms)."""

    def __init__(self, num_records: int, out: TextIO,
                 clock: Callable[[], float] = time.monotonic,
                 reporting_interval_ms: int = REPORTING_INTERVAL_MS,
                 before_print: Callable[[], None] | None = None) -> None:
        self.clock = clock
        #: called before a line is printed (clears a progress line on the terminal)
        self.before_print = before_print
        self.out = out
        self.start = self.window_start = clock()
        self.reporting_interval_s = reporting_interval_ms / 1000
        self.sampling = max(1, num_records // min(max(num_records, 1), LATENCY_SAMPLES_MAX))
        self.latencies: list[int] = []
        self.iteration = 0
        self.count = self.bytes = 0
        self.total_latency = 0
        self.max_latency = 0
        self.window_count = self.window_bytes = 0
        self.window_total_latency = 0
        self.window_max_latency = 0

    def record(self, latency_ms: int, size: int) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency_ms
        self.window_max_latency = max(self.window_max_latency, latency_ms)
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        self.iteration += 1
        now = self.clock()
        if now - self.window_start >= self.reporting_interval_s:
            self.print_window(now)
            self.window_start = now
            self.window_count = self.window_bytes = 0
            self.window_total_latency = self.window_max_latency = 0

    def print_window(self, now: float) -> None:
        elapsed_ms = max((now - self.window_start) * 1000, 1e-3)
        recs = 1000.0 * self.window_count / elapsed_ms
        mb = 1000.0 * self.window_bytes / elapsed_ms / (1024.0 * 1024.0)
        avg = self.window_total_latency / self.window_count if self.window_count else 0.0
        if self.before_print is not None:
            self.before_print()
        self.out.write(f"{self.window_count} records sent, {recs:.1f} records/sec "
                       f"({mb:.2f} MB/sec), {avg:.1f} ms avg latency, "
                       f"{float(self.window_max_latency):.1f} ms max latency.\n")
        self.out.flush()

    def print_total(self) -> None:
        elapsed_ms = max((self.clock() - self.start) * 1000, 1e-3)
        recs = 1000.0 * self.count / elapsed_ms
        mb = 1000.0 * self.bytes / elapsed_ms / (1024.0 * 1024.0)
        avg = self.total_latency / self.count if self.count else 0.0
        p50, p95, p99, p999 = percentiles(self.latencies, (0.5, 0.95, 0.99, 0.999))
        self.out.write(f"{self.count} records sent, {recs:f} records/sec ({mb:.2f} MB/sec), "
                       f"{avg:.2f} ms avg latency, {float(self.max_latency):.2f} ms max latency, "
                       f"{p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th.\n")
        self.out.flush()


def percentiles(latencies: list[int], shares: tuple[float, ...]) -> list[int]:
    ordered = sorted(latencies)
    if not ordered:
        return [0] * len(shares)
    return [ordered[min(int(p * len(ordered)), len(ordered) - 1)] for p in shares]


class Throttler:
    """Kafka's ThroughputThrottler: sleep so that sent/elapsed stays <= target."""

    def __init__(self, target_per_s: float, start: float) -> None:
        self.target = target_per_s
        self.start = start

    def wait(self, sent: int, now: float) -> float:
        """Seconds to sleep before sending record number `sent` (0 when unthrottled)."""
        if self.target <= 0:
            return 0.0
        return max(0.0, sent / self.target - (now - self.start))


def payloads(args: argparse.Namespace) -> list[bytes]:
    if args.payload_file:
        delimiter = args.payload_delimiter.encode().decode("unicode_escape")
        try:
            text = Path(args.payload_file).read_text()
        except OSError as exc:
            raise ToolError(f"cannot read {args.payload_file}: {exc.strerror}") from exc
        items = [p.encode() for p in text.split(delimiter) if p]
        if not items:
            raise ToolError(f"File is empty: {args.payload_file}")
        return items
    if args.record_size < 0:
        raise ToolError("--record-size must be >= 0")
    rnd = random.Random()
    return [bytes(rnd.randrange(26) + 65 for _ in range(args.record_size))]


def run(args: argparse.Namespace) -> int:
    try:
        ck = require_client()
        config = with_delivery_timeout(client_config(
            args.bootstrap_server, read_properties(args.producer_config),
            parse_pairs(args.producer_props, "producer property")))
        producer = ck.Producer(config)
        items = payloads(args)
    except ToolError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return 1
    return produce_all(producer, args, items,
                       describe_error=lambda err: delivery_error(config, err))


def produce_all(producer: Any, args: argparse.Namespace, items: list[bytes],
                describe_error: Callable[[Any], str] = lambda err: str(err.str())) -> int:
    progress = Progress()
    stats = Stats(args.num_records, sys.stdout,
                  reporting_interval_ms=args.reporting_interval, before_print=progress.clear)
    throttler = Throttler(args.throughput, stats.start)
    errors = 0
    first_error: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        nonlocal errors
        if err is not None:
            errors += 1
            if not first_error:
                first_error.append(describe_error(err))
            return
        latency = msg.latency()
        stats.record(int((latency or 0.0) * 1000), len(msg.value()))

    topic = args.topic
    rnd = random.Random()
    single = items[0] if len(items) == 1 else None
    try:
        for i in range(args.num_records):
            if errors and not stats.count:
                break  # nothing gets through (no broker, say): more records only wait too
            pause = throttler.wait(i, time.monotonic())
            if pause > 0:
                producer.poll(pause)
            value = single if single is not None else items[rnd.randrange(len(items))]
            while True:
                try:
                    producer.produce(topic, value, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.005)
            producer.poll(0)
            progress.update(f"{bar(stats.count, args.num_records)} {stats.count} acked")
        while producer.flush(0.5):
            progress.update(f"{bar(stats.count, args.num_records)} {stats.count} acked")
            if time.monotonic() - stats.start > FLUSH_TIMEOUT_S:
                break
    except KeyboardInterrupt:
        producer.flush(5)
    progress.clear()
    stats.print_total()
    if errors:
        print(f"ERROR {errors} records failed; first error: {first_error[0]}", file=sys.stderr)
        return 1
    return 0
