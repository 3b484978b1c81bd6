#!/usr/bin/env python3
"""What one follower round trip costs (issue 26): CPU and syscalls per fetch, apart
from the bytes it carries.

Starts ZooKeeper and three brokers as bench/cluster.py does, creates a one-partition
topic (RF=3, min.insync.replicas=2) and sends `--records` records of `--size` bytes
with acks=all one at a time (linger.ms 0, max.in.flight 1, each flushed before the
next): every record is one produce on the leader and one fetch round trip on each
follower, so a follower's CPU over the run divided by its fetches is the round trip's
own cost (the request's build and encoding, the answer's receive and apply, the loop's
wake-ups), not the copies of a megabyte answer. Reported per round trip: a follower's
user and system CPU (from /proc/PID/stat) and, where `perf` may count syscalls (root,
or perf_event_paranoid <= 1), its syscalls by kind; per record, the leader's CPU. The
follower's fetches are its sendto calls (one per request) when perf counts them, else
the records (one round trip each, which the counts confirm).

Example:
    python bench/follower_round_trip.py --records 3000 --json /tmp/round_trip.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster.cluster import Cluster  # noqa: E402
from tests.cluster.zookeeper import ZooKeeperServer, unavailable_reason  # noqa: E402

#: the follower's syscalls counted (the ones a round trip makes)
SYSCALLS = ("sendto", "recvfrom", "epoll_pwait", "epoll_ctl", "setsockopt", "pwritev",
            "futex")
#: records sent before the count starts (the session set up, the fetcher connected)
WARM_UP = 50


def cpu_s(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def start_syscall_count(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    perf = shutil.which("perf")
    if perf is None:
        return None
    events = ",".join(f"syscalls:sys_enter_{name}" for name in SYSCALLS)
    proc = subprocess.Popen([perf, "stat", "-x,", "-e", events, "-p", str(pid), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached before the count starts
    return None if proc.poll() is not None else proc


def read_syscall_count(proc: subprocess.Popen[bytes] | None, out: Path) -> dict[str, int]:
    if proc is None:
        return {}
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    counts = {}
    for line in out.read_text().splitlines():
        fields = line.split(",")
        if len(fields) > 2 and "syscalls:sys_enter_" in fields[2] and fields[0].isdigit():
            counts[fields[2].split("sys_enter_")[1]] = int(fields[0])
    return counts


def measure(cluster: Cluster, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    topic = f"rt-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    leader = cluster.leader(topic, 0)
    pids = {b: broker.proc.pid for b, broker in cluster.brokers.items() if broker.proc}
    follower = next(b for b in pids if b != leader)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 0, "max.in.flight.requests.per.connection": 1,
                         "log_level": 0})
    value = b"v" * args.size
    for _ in range(WARM_UP):
        producer.produce(topic, value, partition=0)
        producer.flush(10)
    counter = start_syscall_count(pids[follower], workdir / "perf-stat.txt")
    before = {b: cpu_s(pid) for b, pid in pids.items()}
    load = os.getloadavg()[0]
    start = time.monotonic()
    for _ in range(args.records):
        producer.produce(topic, value, partition=0)
        if producer.flush(10):
            raise RuntimeError("a record was not acknowledged within 10 s")
    seconds = time.monotonic() - start
    after = {b: cpu_s(pid) for b, pid in pids.items()}
    syscalls = read_syscall_count(counter, workdir / "perf-stat.txt")
    round_trips = syscalls.get("sendto") or args.records
    user, system = (after[follower][i] - before[follower][i] for i in (0, 1))
    leader_user, leader_system = (after[leader][i] - before[leader][i] for i in (0, 1))
    return {
        "records": args.records, "size": args.size, "seconds": round(seconds, 2),
        "follower_round_trips": round_trips,
        "follower_user_us_per_round_trip": round(user / round_trips * 1e6),
        "follower_system_us_per_round_trip": round(system / round_trips * 1e6),
        "leader_user_us_per_record": round(leader_user / args.records * 1e6),
        "leader_system_us_per_record": round(leader_system / args.records * 1e6),
        "follower_syscalls_per_round_trip": {k: round(v / round_trips, 2)
                                             for k, v in syscalls.items()},
        "load_average": [round(load, 1), round(os.getloadavg()[0], 1)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=3000, help="records, one round trip each")
    ap.add_argument("--size", type=int, default=1024, help="bytes a record")
    ap.add_argument("--json", type=Path, help="write the result as JSON here")
    args = ap.parse_args()
    reason = unavailable_reason()
    if reason:
        sys.exit(f"cannot run ZooKeeper: {reason}")
    with tempfile.TemporaryDirectory(prefix="pybroker-round-trip-") as tmp:
        zookeeper = ZooKeeperServer(Path(tmp) / "zk").start()
        cluster = Cluster(zookeeper, Path(tmp) / "brokers")
        try:
            cluster.start()
            result = measure(cluster, Path(tmp), args)
        finally:
            cluster.close()
            zookeeper.stop()
    calls = " ".join(f"{k} {v}" for k, v in result["follower_syscalls_per_round_trip"].items())
    print(f"{result['follower_round_trips']} follower round trips of {args.size} B: follower "
          f"{result['follower_user_us_per_round_trip']} us user + "
          f"{result['follower_system_us_per_round_trip']} us system a round trip; leader "
          f"{result['leader_user_us_per_record']} us user + "
          f"{result['leader_system_us_per_record']} us system a record; syscalls a round "
          f"trip: {calls or 'not counted (perf)'}; load {result['load_average']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
