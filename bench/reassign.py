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

Examples:
    python bench/reassign.py                                   # 1 GB, unthrottled and 50 MB/s
    python bench/reassign.py --megabytes 200 --throttle-mb 20 --json out.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
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
        started = time.monotonic()
        tool(*execute)
        wait_for(lambda: "still in progress" not in tool(
            "reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
            "--reassignment-json-file", str(plan)), args.timeout, "the move", poll_s=0.5)
        seconds = time.monotonic() - started
        moved = sum(f.stat().st_size for f in (cluster.brokers[4].data_dir).glob(
            f"{TOPIC}-*/*.log"))
        return {"throttle_bytes_per_s": throttle, "seconds": round(seconds, 2),
                "bytes_moved": moved, "mb_per_s": round(moved / MB / seconds, 1)}
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
    ap.add_argument("--timeout", type=float, default=900.0, help="bound of one move (s)")
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        sys.exit(f"cannot run ZooKeeper: {reason}")
    results: dict[str, Any] = {"machine": machine_info(), "argv": sys.argv, "cases": []}
    for throttle in (None, int(args.throttle_mb * MB)):
        with tempfile.TemporaryDirectory(prefix="pybroker-reassign-bench-") as tmp:
            case = one_case(Path(tmp), args, throttle)
        results["cases"].append(case)
        label = "no throttle" if throttle is None else f"throttle {throttle} B/s"
        print(f"{label}: moved {case['bytes_moved']} bytes in {case['seconds']} s "
              f"({case['mb_per_s']} MB/s)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
