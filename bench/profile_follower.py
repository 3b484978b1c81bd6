#!/usr/bin/env python3
"""Where a follower spends its time (issue 26): py-spy on one follower broker while
an RF=3 acks=all produce runs (or, with `--role leader`, on the partition's leader).

Starts ZooKeeper and three brokers as bench/cluster.py does, creates a one-partition
topic (RF=3, min.insync.replicas=2), attaches `py-spy record --native` (a dev tool:
`pip install py-spy`; it pauses the process to sample, so the run is slower than
unprofiled) to a broker that follows the partition, sends `--records` 1 KiB records
with cluster.py's producer, and prints the busiest frames of the broker's main (event-loop)
thread, by own time and under the fetcher's `_fetch_once`. `--raw` keeps py-spy's raw
output (one stack per line) for a flame graph.

Example:
    python bench/profile_follower.py --records 200000 --raw /tmp/follower.raw
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cluster import KiB, produce_all, wait_replicated  # noqa: E402

from tests.cluster.cluster import Cluster  # noqa: E402
from tests.cluster.zookeeper import ZooKeeperServer, unavailable_reason  # noqa: E402

#: a frame of the broker's main (event-loop) thread; with the GIL released (the Rust
#: append) py-spy shows the Python frames without the loop's native ones under them
MAIN_FRAME = "serve_command"


def stacks(raw: Path) -> list[tuple[list[str], int]]:
    out = []
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            out.append(([f.split(" (")[0] for f in stack.split(";")], int(count)))
    return out


def summary(raw: Path, top: int) -> None:
    loop = [(names, n) for names, n in stacks(raw) if MAIN_FRAME in names]
    total = sum(n for _, n in loop) or 1
    own: collections.Counter[str] = collections.Counter()
    under: collections.Counter[str] = collections.Counter()
    fetch_total = 0
    for names, n in loop:
        own[names[-1]] += n
        if "ReplicaFetcher._fetch_once" in names:
            fetch_total += n
            for name in set(names[names.index("ReplicaFetcher._fetch_once") + 1:]):
                under[name] += n
    print(f"main thread: {total} samples, {100 * fetch_total / total:.1f} % under "
          f"ReplicaFetcher._fetch_once")
    print("own time:")
    for name, n in own.most_common(top):
        print(f"  {100 * n / total:5.1f} %  {name}")
    print("under _fetch_once (inclusive, % of the thread):")
    for name, n in under.most_common(top):
        print(f"  {100 * n / total:5.1f} %  {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="1 KiB records to send")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--top", type=int, default=15, help="frames listed per table")
    ap.add_argument("--raw", type=Path, help="keep py-spy's raw output here")
    ap.add_argument("--role", choices=["follower", "leader"], default="follower",
                    help="profile a follower (default) or the partition's leader")
    args = ap.parse_args()
    spy = shutil.which("py-spy")
    if spy is None:
        sys.exit("py-spy not found; pip install py-spy")
    reason = unavailable_reason()
    if reason:
        sys.exit(f"cannot run ZooKeeper: {reason}")
    with tempfile.TemporaryDirectory(prefix="pybroker-profile-follower-") as tmp:
        raw = args.raw or Path(tmp) / "follower.raw"
        zookeeper = ZooKeeperServer(Path(tmp) / "zk").start()
        cluster = Cluster(zookeeper, Path(tmp) / "brokers")
        try:
            cluster.start()
            topic = f"pf-{uuid.uuid4().hex[:8]}"
            cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
            leader = cluster.leader(topic, 0)
            follower = next(b for b in cluster.brokers if b != leader)
            profiled = leader if args.role == "leader" else follower
            proc = cluster.brokers[profiled].proc
            assert proc is not None
            sampler = subprocess.Popen(
                [spy, "record", "--pid", str(proc.pid), "--rate", str(args.rate), "--native",
                 "--format", "raw", "--output", str(raw)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # attached before the load starts
            seconds = produce_all(cluster.bootstrap, topic, 1, args.records, "all", 300)
            wait_replicated(cluster.bootstrap, topic, 1, args.records)
            sampler.send_signal(signal.SIGINT)
            sampler.wait(60)
            print(f"RF=3 acks=all, one partition, profiled: "
                  f"{args.records * KiB / 1e6 / seconds:.1f} MB/s; {args.role}: broker {profiled}")
        finally:
            cluster.close()
            zookeeper.stop()
        summary(raw, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
