"""What a 3-broker RF 3 cluster costs while nothing happens, at many partitions (issue 25).

With no records flowing, each follower still fetches from each leader every
replica.fetch.wait.max.ms, over every partition it follows from it: what the leader's
fetch handler does per fetch for partitions that did not move is the broker's CPU at
rest, and the event loop's work that every request waits behind. This creates the
partitions (100-partition topics), waits until all are led, lets the cluster settle,
then reads each broker's CPU time (/proc/PID/stat, user + system) over a window. CPU
seconds are a steadier figure than wall time on a loaded machine.

    python bench/idle_cpu.py --partitions 3000 --seconds 30 [--json out.json]

The brokers run the `pybroker` this Python imports (PYTHONPATH selects a checkout)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from pybroker.tools._load.workload import wait_all_led  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--json")
    args = parser.parse_args()

    from tests.cluster.cluster import Cluster
    from tests.cluster.zookeeper import ZooKeeperServer

    with tempfile.TemporaryDirectory(prefix="bench-idle-cpu-") as tmp:
        zookeeper = ZooKeeperServer(Path(tmp) / "zk").start()
        cluster = Cluster(zookeeper, Path(tmp) / "brokers",
                          overrides={"zookeeper.session.timeout.ms": 18000})
        try:
            cluster.start(ready_timeout_s=300)
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            names = [f"idle-{i:04d}" for i in range(args.partitions // 100)]
            for name in names:
                admin.create_topics([NewTopic(name, 100, 3)])[name].result(300)
            for name in names:
                wait_all_led(admin, name, 100, timeout=600)
            time.sleep(args.settle)
            pids = {b: broker.proc.pid for b, broker in cluster.brokers.items()}
            load = os.getloadavg()
            before = {b: cpu_seconds(p) for b, p in pids.items()}
            time.sleep(args.seconds)
            used = {b: (cpu_seconds(p) - before[b]) / args.seconds for b, p in pids.items()}
            result = {"partitions": args.partitions, "seconds": args.seconds,
                      "cpu_s_per_s": used, "load": [load, os.getloadavg()]}
            print(f"{args.partitions} partitions RF 3, idle: CPU s per s by broker "
                  + ", ".join(f"{b}: {u:.3f}" for b, u in sorted(used.items()))
                  + f" (load {load[0]:.1f} -> {os.getloadavg()[0]:.1f})")
            if args.json:
                Path(args.json).write_text(json.dumps(result, indent=1))
        finally:
            cluster.close()
            zookeeper.stop()


if __name__ == "__main__":
    main()
