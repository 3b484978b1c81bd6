#!/usr/bin/env python3
"""Partition reassignment (issue 15): how long moving 1 GB onto a new broker takes,
with and without a replication throttle.

For each case: a ZooKeeper server (Debian's package, as the tests run it) and three
pybroker processes on loopback; a topic of `--partitions` partitions, replication
factor 1, filled with `--megabytes` MB of 1 KiB records (acks=1); a fourth broker
joins; `pybroker reassign-partitions --execute` moves every partition onto it and
the clock runs until `--verify` reports every partition completed (polled every
0.5 s; its own run time, about 0.3 s, is part of the figure). The case with a
throttle runs `--execute --throttle RATE`; the rate itself is given to the brokers
as `leader.replication.throttled.rate` / `follower.replication.throttled.rate`
static broker configs as well as by the tool (which sets them as dynamic broker
configs, and the throttled-replicas topic configs, as Kafka's does).

Beside the time to `--verify` complete, each case reports where it went: when the
first bytes and all of them were on broker 4 (its log files' sizes, sampled every
0.1 s), the CPU seconds of each broker over the move (/proc/<pid>/stat), and those of
the tool runs (--execute and every --verify, which share the machine's cores with
the move).

Examples:
    python bench/reassign.py                                   # 1 GB, unthrottled and 50 MB/s
    python bench/reassign.py --megabytes 200 --throttle-mb 20 --json out.json
    python bench/reassign.py --only unthrottled                 # 1 GB, no throttle only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

try:
    from confluent_kafka import Producer

    from tests.cluster.cluster import Cluster, wait_for
    from tests.cluster.operate import add_broker
    from tests.cluster.zookeeper import ZooKeeperServer, unavailable_reason
    from throughput import machine_info
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install -e '.[test]'")

MB = 1_000_000
RECORD = 1024
TOPIC = "moving"


def tool(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pybroker", *args], capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout


def fill(bootstrap: str, partitions: int, megabytes: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                         "batch.size": 1_000_000})
    payload = b"x" * RECORD
    for i in range(megabytes * MB // RECORD):
        while True:
            try:
                producer.produce(TOPIC, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0, "records left undelivered"


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU seconds of this process's children that have ended (the tool runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Arrival:
    """Samples how many bytes of the topic's logs a broker has, every 0.1 s, and when
    the first and the last of `total` arrived."""

    def __init__(self, data_dir: Path, total: int) -> None:
        self.data_dir = data_dir
        self.total = total
        self.started = time.monotonic()
        self.first_s: float | None = None
        self.all_s: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            have = 0
            for f in self.data_dir.glob(f"{TOPIC}-*/*.log"):
                try:
                    have += f.stat().st_size
                except FileNotFoundError:
                    pass  # a segment deleted or renamed meanwhile
            at = round(time.monotonic() - self.started, 2)
            if have and self.first_s is None:
                self.first_s = at
            if have >= self.total and self.all_s is None:
                self.all_s = at

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def one_case(tmp: Path, args: argparse.Namespace, throttle: int | None) -> dict[str, Any]:
    overrides: dict[str, object] = {}
    if throttle is not None:
        overrides = {"leader.replication.throttled.rate": throttle,
                     "follower.replication.throttled.rate": throttle}
    zookeeper = ZooKeeperServer(tmp / "zk").start()
    cluster = Cluster(zookeeper, tmp / "brokers", overrides=overrides)
    try:
        cluster.start()
        cluster.create_topic(TOPIC, args.partitions, replication=1)
        fill(cluster.bootstrap, args.partitions, args.megabytes)
        total = sum(f.stat().st_size for b in cluster.brokers.values()
                    for f in b.data_dir.glob(f"{TOPIC}-*/*.log"))
        add_broker(cluster, 4)
        plan = tmp / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": p, "replicas": [4]}
            for p in range(args.partitions)]}))
        bootstrap = cluster.brokers[1].bootstrap
        execute = ["reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                   "--reassignment-json-file", str(plan)]
        if throttle is not None:
            execute += ["--throttle", str(throttle)]
        pids = {i: b.proc.pid for i, b in cluster.brokers.items() if b.proc is not None}
        cpu_before = {i: cpu_seconds(pid) for i, pid in pids.items()}
        tools_before = children_cpu_seconds()
        started = time.monotonic()
        arrival = Arrival(cluster.brokers[4].data_dir, total)
        tool(*execute)
        wait_for(lambda: "still in progress" not in tool(
            "reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
            "--reassignment-json-file", str(plan)), args.timeout, "the move", poll_s=0.5)
        seconds = time.monotonic() - started
        arrival.stop()
        cpu = {i: round(cpu_seconds(pid) - cpu_before[i], 2) for i, pid in pids.items()}
        moved = sum(f.stat().st_size for f in (cluster.brokers[4].data_dir).glob(
            f"{TOPIC}-*/*.log"))
        return {"throttle_bytes_per_s": throttle, "seconds": round(seconds, 2),
                "bytes_moved": moved, "mb_per_s": round(moved / MB / seconds, 1),
                "first_bytes_s": arrival.first_s, "all_bytes_s": arrival.all_s,
                "brokers_cpu_s": cpu,
                "tools_cpu_s": round(children_cpu_seconds() - tools_before, 2),
                "load_average": os.getloadavg()}
    finally:
        cluster.close()
        zookeeper.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megabytes", type=int, default=1000, help="data to move (default 1 GB)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of the topic")
    ap.add_argument("--throttle-mb", type=float, default=50.0,
                    help="the throttled case's rate in MB/s (default 50)")
    ap.add_argument("--only", choices=("unthrottled", "throttled"),
                    help="run only this case (default: both)")
    ap.add_argument("--timeout", type=float, default=900.0, help="bound of one move (s)")
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        sys.exit(f"cannot run ZooKeeper: {reason}")
    results: dict[str, Any] = {"machine": machine_info(), "argv": sys.argv, "cases": []}
    throttles = {"unthrottled": [None], "throttled": [int(args.throttle_mb * MB)]}.get(
        args.only, [None, int(args.throttle_mb * MB)])
    for throttle in throttles:
        with tempfile.TemporaryDirectory(prefix="pybroker-reassign-bench-") as tmp:
            case = one_case(Path(tmp), args, throttle)
        results["cases"].append(case)
        label = "no throttle" if throttle is None else f"throttle {throttle} B/s"
        print(f"{label}: moved {case['bytes_moved']} bytes in {case['seconds']} s "
              f"({case['mb_per_s']} MB/s); on broker 4 from {case['first_bytes_s']} s, "
              f"all by {case['all_bytes_s']} s; CPU s: brokers {case['brokers_cpu_s']}, "
              f"tool runs {case['tools_cpu_s']}; load average "
              f"{' '.join(f'{x:.1f}' for x in case['load_average'])}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
