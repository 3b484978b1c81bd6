#!/usr/bin/env python3
"""End-to-end latency at a fixed produce rate: pybroker against a peer, same client, same run.

A confluent-kafka producer sends records at a fixed rate (default 20,000/s of 1 KiB) to a
one-partition topic; a consumer in a second thread, assigned at the log end, reads them back.
Each record carries its send time (monotonic ns), so latency = receive time - send time, which
covers the producer's batching, the produce request, the broker append, the consumer's long
poll being woken and the fetch response. Sides run one after the other, `--repeat` times,
interleaved; the table shows p50 / p99 / p99.9 / max of every record of every run per side.

Producer: acks=1, linger.ms=0 by default (a latency test; `--linger-ms 5` matches the
throughput settings). Consumer: fetch.wait.max.ms=500, fetch.min.bytes=1 (librdkafka defaults),
so a broker that does not wake long polls on append shows it here.

Each run starts with `--warmup-seconds` (default 1) of the same load whose records are not
counted: the first milliseconds of a run time the clients' start (the producer's connection
to the partition leader, the first request of each kind) and the fresh topic, not the
broker's steady state, as benchmark harnesses such as the OpenMessaging Benchmark do. The
same warm-up applies to every side; `--warmup-seconds 0` measures from the first record.

Meanwhile a loop-lag probe sends ApiVersions every 5 ms on a connection of its own and
times the answers: a broker-side stall (event loop blocked, GC pause) shows there as a long
round trip, apart from the records' path; its percentiles are printed and in the JSON.
The kernel's writeback counters (/proc/vmstat nr_dirty and nr_writeback, in MB, sampled
every 100 ms) are reported too: the page cache the broker's writes go through.

Where the counted seconds went, per process (the broker, and this process: the client),
from the scheduler's own counts (/proc/PID/task/*/schedstat, status): each thread's CPU
seconds, the seconds it was runnable but waiting for a CPU, and how often it was
preempted. On 2 cores the broker's event loop and the client take most of both: a loop
thread that waited seconds for a CPU says the tail is CPU contention (the client or
other work), not something the broker blocked on. Each record that took 5 ms or more is
kept in the JSON with its send time (CLOCK_MONOTONIC, as `perf record -k
CLOCK_MONOTONIC` stamps events) so that a tail can be lined up with a trace of the broker.

With `--bulk-mb N` each run first puts N MB of 1 KiB records through the same broker at
full speed (produced to a 3-partition topic, acks=1, linger.ms=5, then consumed back),
and measures right after it: the tail of a broker that has just taken a bulk load
(dirty pages being written back, segments rolled), not of a fresh one (issue 26).
`--override KEY=VALUE` passes a broker setting to the pybroker sides.

Examples:
    python bench/latency.py --peer tansu
    python bench/latency.py --rate 20000 --seconds 10 --peer 127.0.0.1:9092
    python bench/latency.py --peer none --bulk-mb 3000 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shlex
import socket
import statistics
import struct
import sys
import threading
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import (  # noqa: E402
    BrokerRun,
    consume,
    create_topic,
    machine_info,
    parse_side,
    produce,
    pybroker_command,
)

try:
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install '.[bench]'")

STAMP = struct.Struct(">q")
#: records at least this slow (the p99.9 goal) are kept with their send time
SLOW_MS = 5.0
SLOW_KEPT = 50_000
#: loop-lag probe: ApiVersions v0 (key 18) with client id "lag", framed
_PROBE_HEADER = struct.Struct(">ihhih")


class LoopLagProbe(threading.Thread):
    """ApiVersions v0 on a connection of its own every `interval` seconds. The broker
    answers it from memory, so its round trip is how long the broker's event loop takes
    to get to a new request: a stall (GC pause, a blocking call, a long handler step)
    shows as one long probe, whatever the records' path is doing."""

    def __init__(self, bootstrap: str, interval: float = 0.005) -> None:
        super().__init__(name="loop-lag-probe", daemon=True)
        host, port = bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.interval = interval
        self.rtts_ms: list[float] = []
        #: time.time() each probe was sent at, so a run can be cut into phases
        self.sent_at: list[float] = []
        #: why the probe stopped early (with `until_gone`: the broker went away)
        self.error: Exception | None = None
        self.until_gone = False
        self._done = threading.Event()

    def run(self) -> None:
        try:
            self._probe()
        except OSError as exc:  # ConnectionError included
            if not self.until_gone:
                raise
            self.error = exc

    def _probe(self) -> None:
        with socket.create_connection(self.address, timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.until_gone:
                sock.settimeout(None)  # a stall of any length is measured, not cut
            correlation = 0
            while not self._done.wait(self.interval):
                correlation += 1
                frame = _PROBE_HEADER.pack(_PROBE_HEADER.size - 4 + 3, 18, 0, correlation,
                                           3) + b"lag"
                sent = time.time()
                t0 = time.perf_counter_ns()
                sock.sendall(frame)
                size = struct.unpack(">i", _recv_exact(sock, 4))[0]
                _recv_exact(sock, size)
                self.rtts_ms.append((time.perf_counter_ns() - t0) / 1e6)
                self.sent_at.append(sent)

    def stop(self) -> list[float]:
        self._done.set()
        self.join(timeout=15)
        return self.rtts_ms


class ProbeProcess:
    """The loop-lag probe in a process of its own. In this one it shares the GIL and,
    on 2 cores, the CPU with the producer loop and the consumer of a 20,000/s client,
    so a probe answered in time could still wait for its own process; apart, its round
    trip is the broker's. It runs on every CPU whatever this process is pinned to."""

    def __init__(self, bootstrap: str, interval: float = 0.005) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_run_probe, args=(bootstrap, interval, child),
                                 name="loop-lag-probe", daemon=True)

    def start(self, timeout: float = 60.0) -> None:
        """Returns once the probe is connected and sending."""
        self._proc.start()
        if not self._conn.poll(timeout):
            raise TimeoutError("the loop-lag probe process did not start")
        self._conn.recv()

    def stop(self) -> tuple[list[float], list[float]]:
        """(round trips in ms, time.time() each was sent at)."""
        self._conn.send("stop")
        rtts, sent_at = self._conn.recv() if self._conn.poll(30) else ([], [])
        self._proc.join(10)
        return rtts, sent_at


def _run_probe(bootstrap: str, interval: float, conn: Connection) -> None:
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
    probe = LoopLagProbe(bootstrap, interval)
    probe.start()
    conn.send("ready")
    conn.recv()
    rtts = probe.stop()
    n = min(len(rtts), len(probe.sent_at))  # stopped between the two appends
    conn.send((rtts[:n], probe.sent_at[:n]))


class WritebackSampler(threading.Thread):
    """nr_dirty and nr_writeback of /proc/vmstat (pages, reported in MB) every 100 ms."""

    FIELDS = ("nr_dirty", "nr_writeback")

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(name="writeback-sampler", daemon=True)
        self.interval = interval
        self.samples: dict[str, list[float]] = {f: [] for f in self.FIELDS}
        self._done = threading.Event()
        self._page_mb = os.sysconf("SC_PAGE_SIZE") / 1e6

    def read(self) -> dict[str, float]:
        try:
            lines = Path("/proc/vmstat").read_text().splitlines()
        except OSError:
            return {}
        values = dict(line.split() for line in lines)
        return {f: int(values[f]) * self._page_mb for f in self.FIELDS if f in values}

    def run(self) -> None:
        while not self._done.wait(self.interval):
            for name, mb in self.read().items():
                self.samples[name].append(mb)

    def stop(self) -> dict[str, dict[str, float]]:
        self._done.set()
        self.join(timeout=5)
        return {name: {"mean_mb": round(statistics.fmean(v), 1) if v else float("nan"),
                       "max_mb": round(max(v), 1) if v else float("nan"),
                       "first_mb": round(v[0], 1) if v else float("nan")}
                for name, v in self.samples.items()}


class ThreadTimes:
    """Where each thread of a process spent an interval, from the scheduler's own counts
    (/proc/PID/task/TID/schedstat: ns on a CPU, ns runnable but waiting for one; the
    context switches from status). On a shared machine the wall clock of a slow request
    does not say whether the thread worked, waited for a CPU (preempted: the client, other
    work) or slept (idle in the selector, or blocked in a syscall); these do, and they are
    not skewed by the load the way latencies are."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._start: dict[int, tuple[str, int, int, int, int]] = {}
        self._t0 = 0.0

    def read(self) -> dict[int, tuple[str, int, int, int, int]]:
        out: dict[int, tuple[str, int, int, int, int]] = {}
        base = Path(f"/proc/{self.pid}/task")
        try:
            tids = [int(t.name) for t in base.iterdir()]
        except OSError:
            return out
        for tid in tids:
            try:
                run_ns, wait_ns, _ = (int(v) for v in
                                      (base / str(tid) / "schedstat").read_text().split())
                status = dict(line.split(":", 1) for line in
                              (base / str(tid) / "status").read_text().splitlines()
                              if ":" in line)
            except (OSError, ValueError):
                continue  # the thread ended meanwhile
            out[tid] = (status["Name"].strip(), run_ns, wait_ns,
                        int(status["voluntary_ctxt_switches"]),
                        int(status["nonvoluntary_ctxt_switches"]))
        return out

    def start(self) -> None:
        self._start = self.read()
        self._t0 = time.monotonic()

    def stop(self) -> dict[str, object]:
        """Per thread name (threads of one name summed; the main thread as "main"):
        seconds on a CPU and waiting for one, and the switches, over the interval."""
        end = self.read()
        seconds = time.monotonic() - self._t0
        names: dict[str, dict[str, float]] = {}
        for tid, (name, run_ns, wait_ns, vol, invol) in end.items():
            _, run0, wait0, vol0, invol0 = self._start.get(tid, (name, 0, 0, 0, 0))
            key = "main" if tid == self.pid else name
            row = names.setdefault(key, {"threads": 0, "cpu_s": 0.0, "runqueue_s": 0.0,
                                         "voluntary_switches": 0, "preempted": 0})
            row["threads"] += 1
            row["cpu_s"] += (run_ns - run0) / 1e9
            row["runqueue_s"] += (wait_ns - wait0) / 1e9
            row["voluntary_switches"] += vol - vol0
            row["preempted"] += invol - invol0
        for row in names.values():
            row["cpu_s"] = round(row["cpu_s"], 3)
            row["runqueue_s"] = round(row["runqueue_s"], 3)
        return {"seconds": round(seconds, 3),
                "cpu_s": round(sum(r["cpu_s"] for r in names.values()), 3),
                "threads": dict(sorted(names.items(), key=lambda kv: -kv[1]["cpu_s"]))}


def thread_line(label: str, times: dict[str, object]) -> str:
    """One line: the process's CPU over the interval, and its main thread's split."""
    threads: dict[str, dict[str, float]] = times["threads"]  # type: ignore[assignment]
    main = threads.get("main", {})
    seconds = float(times["seconds"])  # type: ignore[arg-type]
    busiest = ", ".join(f"{name} {row['cpu_s']:.2f}" for name, row in
                        list(threads.items())[:4])
    return (f"  {label}: CPU {times['cpu_s']} s in {seconds:.1f} s ({busiest}); main thread "
            f"on CPU {main.get('cpu_s', 0):.2f} s, waiting for a CPU "
            f"{main.get('runqueue_s', 0):.2f} s, preempted {main.get('preempted', 0)} times, "
            f"{main.get('voluntary_switches', 0)} sleeps")


def bulk_load(bootstrap: str, megabytes: int) -> dict[str, float]:
    """`megabytes` MB of 1 KiB records produced at full speed (acks=1, linger.ms=5) to a
    3-partition topic and consumed back: what the broker has just been through."""
    topic = f"bulk-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 3, 30.0)
    records = megabytes * 1_000_000 // 1024
    timeout = max(600.0, megabytes / 5)
    produced = produce(bootstrap, topic, 3, 1024, records, timeout)
    consumed = consume(bootstrap, topic, 3, 1024, records, timeout, 30.0)
    return {"megabytes": megabytes, "produce_s": round(produced, 2),
            "consume_s": round(consumed, 2)}


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("broker closed the probe connection")
        out += chunk
    return bytes(out)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def measure(bootstrap: str, rate: int, seconds: float, size: int,
            linger_ms: int, warmup: float = 0.0,
            writeback: WritebackSampler | None = None,
            threads: dict[str, ThreadTimes] | None = None,
            slow: list[tuple[float, float]] | None = None,
            ) -> tuple[list[float], list[float], dict[str, object]]:
    """Latencies in ms of every record sent at `rate`/s for `seconds` after `warmup`
    seconds of the same load, the loop-lag probe's round trips in ms meanwhile, and
    each of `threads`' split of the counted seconds (by label); `writeback` and
    `threads` are started when the counted records start. `slow` gets (send time in
    CLOCK_MONOTONIC seconds, as `perf record -k CLOCK_MONOTONIC` stamps its events;
    latency in ms) of each counted record that took SLOW_MS or more, so that a tail
    can be lined up with a trace of the broker taken meanwhile."""
    topic = f"latency-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1, 30.0)
    warmup_records = int(rate * warmup)
    total = int(rate * seconds)
    latencies: list[float] = []
    #: records sent (monotonic ns) before this are warm-up: read, not counted
    counted_from = [2**63 - 1]
    ready = threading.Event()
    done = threading.Event()
    split: dict[str, object] = {}

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                             "enable.auto.commit": False, "log_level": 0})
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        # the first poll makes the assignment effective before the producer starts
        consumer.poll(0.5)
        ready.set()
        deadline = time.monotonic() + warmup + seconds + 30
        while len(latencies) < total and time.monotonic() < deadline:
            # poll, not consume(n): consume waits for n records and would add its own delay
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                sent = STAMP.unpack_from(msg.value())[0]
                if sent >= counted_from[0]:
                    took = (time.monotonic_ns() - sent) / 1e6
                    latencies.append(took)
                    if slow is not None and took >= SLOW_MS and len(slow) < SLOW_KEPT:
                        slow.append((sent / 1e9, took))
        # here, while this thread still runs: an ended thread's CPU is gone from /proc
        split.update({label: times.stop() for label, times in (threads or {}).items()})
        consumer.close()
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    ready.wait(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": linger_ms,
                         "batch.size": 1000000, "log_level": 0})
    padding = b"x" * (size - STAMP.size)
    probe = ProbeProcess(bootstrap)
    probe.start()
    tick = 0.001  # pace in 1 ms slices: rate/1000 records per slice
    per_tick = rate * tick
    start = time.monotonic()
    sent = 0
    probe_from = float("inf")
    last = warmup_records + total
    while sent < last:
        due = min(last, int((time.monotonic() - start) / tick * per_tick) + 1)
        while sent < due:
            if sent == warmup_records:
                counted_from[0] = time.monotonic_ns()
                probe_from = time.time()
                if writeback is not None:
                    writeback.start()
                for times in (threads or {}).values():
                    times.start()
            producer.produce(topic, STAMP.pack(time.monotonic_ns()) + padding)
            sent += 1
        producer.poll(0)
        next_slice = start + (sent / per_tick) * tick
        pause = next_slice - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    producer.flush(30)
    done.wait(warmup + seconds + 30)
    rtts, sent_at = probe.stop()
    return latencies, [rtt for rtt, at in zip(rtts, sent_at, strict=True)
                       if at >= probe_from], split


def summarize(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "records": len(ordered),
        "p50_ms": percentile(ordered, 50),
        "p99_ms": percentile(ordered, 99),
        "p99.9_ms": percentile(ordered, 99.9),
        "max_ms": ordered[-1] if ordered else float("nan"),
        "mean_ms": statistics.fmean(ordered) if ordered else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="pybroker", help="pybroker, tansu or HOST:PORT")
    ap.add_argument("--peer", default="tansu", help="pybroker, tansu, HOST:PORT or none")
    ap.add_argument("--rate", type=int, default=20000, help="records per second")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of load per run")
    ap.add_argument("--warmup-seconds", type=float, default=1.0,
                    help="seconds of the same load before each run's counted records "
                         "(default 1; 0 counts from the first record)")
    ap.add_argument("--size", type=int, default=1024, help="record size in bytes")
    ap.add_argument("--linger-ms", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--pybroker-cmd", help="command that starts pybroker, before 'serve'")
    ap.add_argument("--peer-pybroker-cmd",
                    help="the same for a pybroker peer, e.g. another build (default: "
                         "--pybroker-cmd)")
    ap.add_argument("--target-label", help="name of the target in the table")
    ap.add_argument("--peer-label", help="name of the peer in the table")
    ap.add_argument("--bulk-mb", type=int, default=0,
                    help="MB of 1 KiB records produced and consumed at full speed through "
                         "the broker right before each run (default 0: a fresh broker)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for the pybroker sides (repeatable)")
    ap.add_argument("--pin", action="store_true",
                    help="pybroker sides on CPU 0 and this process (the client) on the last "
                         "CPU (the loop-lag probe on any): the client's own tail apart from "
                         "the broker's, with neither preempting the other")
    ap.add_argument("--keep-logs", type=Path, help="copy each broker's log here")
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)

    sides = [parse_side(args.target, args.target_label, None, args.pybroker_cmd)]
    if args.peer != "none":
        sides.append(parse_side(args.peer, args.peer_label, None,
                                args.peer_pybroker_cmd or args.pybroker_cmd))
        if sides[0].label == sides[1].label:
            sides[0].label += "-target"
            sides[1].label += "-peer"
    for side in sides:
        if side.kind == "pybroker":
            side.overrides = (*side.overrides, *args.override)
            if args.pin:
                side.pybroker_cmd = shlex.join(["taskset", "-c", "0",
                                                *pybroker_command(side.pybroker_cmd)])
    if args.pin:
        os.sched_setaffinity(0, {(os.cpu_count() or 1) - 1})
    collected: dict[str, list[float]] = {s.label: [] for s in sides}
    lags: dict[str, list[float]] = {s.label: [] for s in sides}
    runs: list[dict[str, object]] = []
    for rep in range(args.repeat):
        for side in sides:
            writeback = WritebackSampler()
            with BrokerRun(side, 60.0, args.keep_logs) as run:
                bulk = bulk_load(run.bootstrap, args.bulk_mb) if args.bulk_mb else None
                before = writeback.read()
                threads = {"client": ThreadTimes(os.getpid())}
                if run.pid is not None:
                    threads["broker"] = ThreadTimes(run.pid)
                slow: list[tuple[float, float]] = []
                values, probe, split = measure(run.bootstrap, args.rate, args.seconds,
                                               args.size, args.linger_ms,
                                               args.warmup_seconds, writeback, threads,
                                               slow)
            dirty = writeback.stop()
            got = summarize(values)
            lag = summarize(probe)
            runs.append({"side": side.label, "rep": rep + 1, "bulk": bulk,
                         "writeback_before_mb": before, "writeback": dirty,
                         "latency": got, "loop_lag_probe": lag, "threads": split,
                         "slow_records": [[round(t, 6), round(ms, 3)] for t, ms in slow],
                         "load_average": os.getloadavg()})
            print(f"[{side.label}] rep {rep + 1}: {got['records']} records, "
                  f"p50 {got['p50_ms']:.2f} ms, p99 {got['p99_ms']:.2f} ms, "
                  f"p99.9 {got['p99.9_ms']:.2f} ms, max {got['max_ms']:.2f} ms; loop-lag "
                  f"probe p99 {lag['p99_ms']:.2f} max {lag['max_ms']:.2f} ms; "
                  f"dirty MB mean {dirty['nr_dirty']['mean_mb']} max "
                  f"{dirty['nr_dirty']['max_mb']}, writeback MB max "
                  f"{dirty['nr_writeback']['max_mb']}"
                  + (f"; after {bulk['megabytes']} MB in {bulk['produce_s']} s + "
                     f"{bulk['consume_s']} s" if bulk else "")
                  + f"; load {os.getloadavg()[0]:.1f}", flush=True)
            for label, times in split.items():
                print(thread_line(label, times), flush=True)
            collected[side.label].extend(values)
            lags[side.label].extend(probe)

    summary = {label: summarize(values) for label, values in collected.items()}
    lag_summary = {label: summarize(values) for label, values in lags.items()}
    print(f"\nend-to-end latency, {args.rate:,} records/s of {args.size} B, "
          f"linger.ms={args.linger_ms}, {args.seconds:g} s x {args.repeat} "
          f"(after {args.warmup_seconds:g} s of warm-up each)")
    labels = list(summary)
    print(f"  {'':12}" + "".join(f"{label:>18}" for label in labels))
    for key in ("records", "p50_ms", "p99_ms", "p99.9_ms", "max_ms", "mean_ms"):
        row = "".join(f"{summary[label][key]:>18,.2f}" for label in labels)
        print(f"  {key:12}{row}")
    print("loop-lag probe (ApiVersions round trip every 5 ms on its own connection)")
    for key in ("records", "p50_ms", "p99_ms", "p99.9_ms", "max_ms"):
        row = "".join(f"{lag_summary[label][key]:>18,.2f}" for label in labels)
        print(f"  {key:12}{row}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "benchmark": "latency",
            "command": "bench/latency.py " + " ".join(argv or sys.argv[1:]),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": machine_info(),
            "settings": vars(args) | {"json": str(args.json)},
            "summary": summary,
            "loop_lag_probe": lag_summary,
            "runs": runs,
        }, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
