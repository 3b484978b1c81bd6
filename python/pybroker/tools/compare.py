"""`pybroker compare`: the same produce and consume workloads against pybroker and a
running stock Kafka (or any Kafka-protocol broker), interleaved, side by side.

    pybroker compare --peer localhost:9093
    pybroker compare --bootstrap-server localhost:9092 --pid 4242 \\
        --peer localhost:9093 --peer-pid 4343 --sizes 100,1024 --partitions 1,8 --json

For every workload (record size x partitions) and repetition, each side gets a fresh
topic: a produce phase (records round-robin over the partitions, acks as given), then a
consume phase of the same records (assign() from offset 0, no group), then an
end-to-end phase as Kafka's EndToEndLatency runs it (one record at a time, produced,
acknowledged and read back by a consumer waiting at the log's end); the sides
alternate (pybroker, peer, pybroker, peer, ...) so that a machine's drift hits both.
Printed: records/s and MB/s (payload bytes, MB = 10**6 bytes), latency percentiles
(produce: to the ack; end-to-end: to the consumer), and the broker's CPU seconds per
GB and peak RSS where its PID is known (--pid, --peer-pid; for a broker on this machine,
the process listening on its port, found with psutil); the ratio column is
pybroker / peer (medians over --repeat). The topics are deleted afterwards. With
--json the progress lines go to stderr and stdout is the JSON alone. CPU and RSS need
psutil: pip install "pybroker[load]"."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

from pybroker.tools import _bootstrap
from pybroker.tools._common import ToolError
from pybroker.tools._load import workload

COMMAND = "compare"
HELP = ("compare pybroker's produce/consume throughput with a running Kafka "
        "(--peer HOST:PORT): records/s, MB/s, latency, CPU/GB, RSS")
OPS = ("produce", "consume", "end-to-end")
#: what a phase's latency is
LATENCY = {"produce": "produce to ack, every record",
           "end-to-end": "produce to consume, one record at a time"}
PEER_READY_TIMEOUT_S = 30.0
#: what a row shows: (label, key, digits)
ROWS = (
    ("records/s", "records_per_s", 0),
    ("MB/s", "mb_per_s", 1),
    ("latency p50 ms", "latency_p50_ms", 2),
    ("latency p99 ms", "latency_p99_ms", 2),
    ("latency p99.9", "latency_p999_ms", 2),
    ("CPU s/GB", "cpu_s_per_gb", 2),
    ("peak RSS MB", "peak_rss_mb", 0),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help="pybroker (default $PYBROKER_BOOTSTRAP_SERVER, else "
                             "localhost:9092)")
    parser.add_argument("--pid", type=int,
                        help="pybroker's PID, for its CPU and RSS (default: the process "
                             "listening on its port, when it runs on this machine)")
    parser.add_argument("--peer", required=True, metavar="HOST:PORT",
                        help="the broker to compare with (a stock Kafka you run)")
    parser.add_argument("--peer-pid", type=int,
                        help="the peer's PID, for its CPU and RSS (default: the process "
                             "listening on its port, when it runs on this machine)")
    parser.add_argument("--records", type=int, default=200_000,
                        help="records per workload and side (default 200000)")
    parser.add_argument("--sizes", default="100,1024",
                        help="record sizes in bytes, comma-separated (default 100,1024)")
    parser.add_argument("--partitions", default="1,8",
                        help="partition counts, comma-separated (default 1,8)")
    parser.add_argument("--acks", default="1", choices=("0", "1", "all"),
                        help="producer acks (default 1)")
    parser.add_argument("--e2e-records", type=int, default=500,
                        help="records of the end-to-end latency phase, one at a time "
                             "(default 500; 0 leaves the phase out)")
    parser.add_argument("--replication-factor", type=int, default=1,
                        help="replication factor of the topics (default 1)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per side and workload; the table shows medians")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds a phase may take (default 300)")
    parser.add_argument("--json", action="store_true",
                        help="print the results as JSON instead of tables")


@dataclass
class Case:
    """One workload and phase: each side's runs, then medians and ratios."""

    op: str
    record_size: int
    partitions: int
    records: int
    runs: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"pybroker": [], "peer": []})

    def to_json(self) -> dict[str, Any]:
        sides = {name: _median(runs) for name, runs in self.runs.items()}
        ratio = {}
        for _label, key, _digits in ROWS:
            a, b = sides["pybroker"].get(key), sides["peer"].get(key)
            ratio[key] = (a / b) if a is not None and b else None
        return {"op": self.op, "record_size": self.record_size,
                "partitions": self.partitions, "records": self.records,
                "pybroker": sides["pybroker"], "peer": sides["peer"], "ratio": ratio}


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": len(runs)}
    for _label, key, _digits in ROWS:
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    return out


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise ToolError(f"{option} takes positive numbers, comma-separated (got '{text}')")
    return values


def _percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def run_phase(op: str, bootstrap: str, pid: int | None, topic: str, size: int,
              partitions: int, records: int, args: argparse.Namespace) -> dict[str, Any]:
    """One phase against one broker: its figures."""
    latencies: list[float] = []
    with workload.Monitor(pid) as monitor:
        if op == "produce":
            seconds = workload.produce(bootstrap, topic, partitions, size, records,
                                       args.timeout, "none", args.acks, None, latencies)
        elif op == "end-to-end":
            seconds, latencies = workload.end_to_end(bootstrap, topic, size, records,
                                                     args.timeout, args.acks,
                                                     dict(workload.CONSUMER_DEFAULTS))
        else:
            seconds = workload.consume(bootstrap, topic, partitions, size, records,
                                       args.timeout, min(30.0, args.timeout),
                                       dict(workload.CONSUMER_DEFAULTS))
    cpu, rss = monitor.result()
    payload = size * records
    latencies.sort()
    ms = [v * 1000 for v in latencies]
    return {
        "seconds": seconds,
        "records_per_s": records / seconds,
        "mb_per_s": payload / 1e6 / seconds,
        "latency_p50_ms": _percentile(ms, 0.50),
        "latency_p99_ms": _percentile(ms, 0.99),
        "latency_p999_ms": _percentile(ms, 0.999),
        "cpu_s_per_gb": cpu / (payload / 1e9) if cpu is not None else None,
        "peak_rss_mb": rss / 1e6 if rss is not None else None,
    }


def run(args: argparse.Namespace) -> int:
    sizes = _ints(args.sizes, "--sizes")
    partition_counts = _ints(args.partitions, "--partitions")
    if args.records < 1 or args.repeat < 1 or args.e2e_records < 0:
        raise ToolError("--records and --repeat take positive numbers, --e2e-records 0 "
                        "or more")
    ops = OPS if args.e2e_records else OPS[:2]
    if (args.pid or args.peer_pid) and workload.psutil is None:
        raise ToolError('--pid and --peer-pid need psutil: pip install "pybroker[load]"')
    _bootstrap.parse(args.peer)  # HOST:PORT, or a one-line refusal
    _bootstrap.probe(_bootstrap.parse(args.peer))
    # a broker on this machine: the process on its port (stock Kafka's is a java whose
    # command line a pgrep has to guess)
    if args.pid is None:
        args.pid = workload.listener_pid(args.bootstrap_server)
    if args.peer_pid is None:
        args.peer_pid = workload.listener_pid(args.peer)
    sides = {"pybroker": (args.bootstrap_server, args.pid), "peer": (args.peer, args.peer_pid)}
    for bootstrap, _pid in sides.values():
        try:
            workload.wait_ready(bootstrap, PEER_READY_TIMEOUT_S, None, None)
        except TimeoutError as exc:
            raise ToolError(str(exc)) from None
    # with --json, stdout is the JSON alone: the progress goes to stderr
    progress = sys.stderr if args.json else sys.stdout

    def say(text: str) -> None:
        print(text, file=progress, flush=True)

    say(f"pybroker {args.bootstrap_server} vs peer {args.peer}: {args.records:,} records "
        f"per phase, acks={args.acks}, repeat {args.repeat}")
    cases: list[Case] = []
    topics: dict[str, list[str]] = {"pybroker": [], "peer": []}
    try:
        for size in sizes:
            for partitions in partition_counts:
                by_op = {op: Case(op, size, partitions, args.records) for op in ops}
                if "end-to-end" in by_op:
                    by_op["end-to-end"].records = args.e2e_records
                cases += by_op.values()
                for rep in range(args.repeat):
                    for name, (bootstrap, pid) in sides.items():
                        topic = f"pybroker-compare-{size}b-{partitions}p-{rep}-" \
                                f"{uuid.uuid4().hex[:8]}"
                        workload.create_topic(bootstrap, topic, partitions,
                                              min(60.0, args.timeout),
                                              args.replication_factor)
                        topics[name].append(topic)
                        for op in ops:
                            figures = run_phase(op, bootstrap, pid, topic, size, partitions,
                                                by_op[op].records, args)
                            by_op[op].runs[name].append(figures)
                            say(f"  {size} B x {partitions}p rep {rep + 1} {name:8s} "
                                f"{op:8s} {figures['records_per_s']:>12,.0f} rec/s "
                                f"{figures['mb_per_s']:>8.1f} MB/s")
    except workload.PhaseError as exc:
        raise ToolError(str(exc)) from None
    finally:
        for name, names in topics.items():
            _delete_topics(sides[name][0], names)
    result = {
        "pybroker": {"bootstrap": args.bootstrap_server, "pid": args.pid},
        "peer": {"bootstrap": args.peer, "pid": args.peer_pid},
        "acks": args.acks,
        "repeat": args.repeat,
        "cases": [case.to_json() for case in cases],
    }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        print_tables(result)
    return 0


def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Best effort: the comparison's results stand even if a topic stays behind."""
    if not topics:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        try:
            future.result(timeout=30)
        except Exception:  # noqa: BLE001 - reported as a left-over topic, nothing more
            print(f"pybroker compare: could not delete a topic on {bootstrap}",
                  file=sys.stderr)


def _fmt(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def print_tables(result: dict[str, Any]) -> None:
    for case in result["cases"]:
        plural = "s" if case["partitions"] > 1 else ""
        print(f"\n{case['op']} {case['record_size']} B records, {case['partitions']} "
              f"partition{plural}, {case['records']:,} records")
        if case["op"] in LATENCY:
            print(f"  (latency: {LATENCY[case['op']]})")
        print(f"  {'':14s}{'pybroker':>14s}{'peer':>14s}{'ratio':>9s}")
        for label, key, digits in ROWS:
            a, b = case["pybroker"].get(key), case["peer"].get(key)
            if a is None and b is None:
                continue  # latency is the producer's; CPU/RSS need a PID
            ratio = case["ratio"].get(key)
            print(f"  {label:14s}{_fmt(a, digits):>14s}{_fmt(b, digits):>14s}"
                  f"{(f'{ratio:.2f}x' if ratio is not None else 'n/a'):>9s}")
