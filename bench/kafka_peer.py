#!/usr/bin/env python3
"""A stock Apache Kafka peer for the side-by-side benchmarks: starts a KRaft cluster of
``--nodes`` combined broker+controller nodes from $KAFKA_HOME (``kafka-storage.sh format``
under one random cluster id, then ``kafka-server-start.sh``; free loopback ports, a fresh
data dir), the same code the tests/java MirrorMaker 2 tests use (tests/java/stock_kafka.py).

With a command after ``--``, runs it with ``{bootstrap}``, ``{pid}`` (the first node's
pid) and ``{pids}`` (every node's, comma-separated) filled in, then stops Kafka and exits
with the command's status. Without one, prints the bootstrap and the pids and keeps Kafka
up until Ctrl-C / SIGTERM. Kafka is always stopped at exit (SIGTERM, kill -9 after 60 s).

Examples:
    python bench/kafka_peer.py -- python bench/controller.py --partitions 5000 \\
        --peer {bootstrap} --peer-pid {pid}
    python bench/kafka_peer.py --nodes 3 -- python bench/cluster.py --only throughput \\
        --peer {bootstrap} --peer-pids {pids}
    python bench/kafka_peer.py --nodes 3        # prints bootstrap=... pids=..., waits
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

try:
    from tests.java.stock_kafka import KafkaUnavailable, start_kafka_cluster
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install -e '.[test]'")

KAFKA_DEFAULT_HEAP = "-Xmx1G -Xms1G"  # what kafka-server-start.sh uses when unset


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1, help="KRaft nodes (default 1)")
    ap.add_argument("--kafka-home", default=os.environ.get("KAFKA_HOME", ""),
                    help="the Kafka distribution (default $KAFKA_HOME)")
    ap.add_argument("--dir", type=Path, help="data and logs here (default: a temp dir, "
                    "deleted at exit)")
    ap.add_argument("--heap", default=KAFKA_DEFAULT_HEAP,
                    help=f"KAFKA_HEAP_OPTS of every node (default Kafka's: {KAFKA_DEFAULT_HEAP})")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="extra server.properties setting of every node (repeatable)")
    ap.add_argument("--timeout", type=float, default=180.0, help="bound of the start-up")
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="-- COMMAND ARGS... to run with the peer up")
    args = ap.parse_args(argv)
    if not args.kafka_home:
        ap.error("no Kafka distribution: set KAFKA_HOME or pass --kafka-home")
    os.environ["KAFKA_HOME"] = args.kafka_home
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    overrides = dict(item.split("=", 1) for item in args.override)

    with tempfile.TemporaryDirectory(prefix="kafka-peer-") as tmp:
        workdir = args.dir or Path(tmp)
        try:
            cluster = start_kafka_cluster(workdir, args.nodes, overrides, args.timeout,
                                          heap=args.heap)
        except KafkaUnavailable as exc:
            sys.exit(f"stock Kafka cannot run from {args.kafka_home}: {exc}")
        pids = ",".join(str(p) for p in cluster.pids)
        print(f"bootstrap={cluster.bootstrap} pids={pids} dir={workdir}", flush=True)
        try:
            if command:
                # plain replacement, not str.format: a command may hold other braces
                filled = [part.replace("{bootstrap}", cluster.bootstrap)
                          .replace("{pids}", pids).replace("{pid}", str(cluster.pids[0]))
                          for part in command]
                return subprocess.call(filled)
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            while not stop.wait(1.0):
                dead = [n.node_id for n in cluster.nodes if not n.app.running]
                if dead:
                    print(f"Kafka node(s) {dead} exited:\n{cluster.log_tail(20)}",
                          file=sys.stderr)
                    return 1
            return 0
        finally:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
