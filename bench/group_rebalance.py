#!/usr/bin/env python3
"""Group join and rebalance time for N members: the classic protocol against KIP-848.

For each protocol a fresh pybroker gets a topic of `--partitions` partitions; N
confluent-kafka consumers of one new group subscribe at once (one process, polled in
turn). Measured:

* join: subscribe() of the first member -> every partition assigned, evenly;
* rebalance: one member closes -> the others hold every partition again; with how
  many of the remaining members had partitions taken away meanwhile (the classic
  eager protocol stops everyone; KIP-848 moves only the leaver's partitions).

Both sides use a 500 ms heartbeat (classic: the client's heartbeat.interval.ms; KIP-848:
the broker's group.consumer.heartbeat.interval.ms, as members learn of new assignments
from their next heartbeat) and group.initial.rebalance.delay.ms=0.

    python bench/group_rebalance.py --members 10 --partitions 20 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import BrokerRun, create_topic, machine_info, parse_side  # noqa: E402

try:
    from confluent_kafka import Consumer
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install '.[bench]'")

HEARTBEAT_MS = 500
BROKER_OVERRIDES = (
    "group.initial.rebalance.delay.ms=0",
    f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
    "group.consumer.min.heartbeat.interval.ms=100",
)
PROTOCOLS = {
    "classic (range, eager)": {"heartbeat.interval.ms": HEARTBEAT_MS,
                               "session.timeout.ms": 10000},
    "classic (cooperative-sticky)": {"heartbeat.interval.ms": HEARTBEAT_MS,
                                     "session.timeout.ms": 10000,
                                     "partition.assignment.strategy": "cooperative-sticky"},
    "KIP-848 (uniform)": {"group.protocol": "consumer"},
}


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, conf: dict[str, Any]) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "log_level": 0, **conf})
        self.incremental = conf.get("group.protocol") == "consumer" or \
            conf.get("partition.assignment.strategy") == "cooperative-sticky"
        self.owned: set[int] = set()
        self.lost = 0
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer: Any, parts: list[Any]) -> None:
        new = {p.partition for p in parts}
        self.owned = self.owned | new if self.incremental else new

    def _revoke(self, consumer: Any, parts: list[Any]) -> None:
        gone = {p.partition for p in parts}
        if self.owned & gone:
            self.lost += 1
        self.owned = self.owned - gone if self.incremental else set()


def wait(members: list[Member], done: Any, timeout: float) -> float:
    start = time.perf_counter()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.consumer.poll(0.005)
        if done():
            return time.perf_counter() - start
    raise RuntimeError(f"not settled within {timeout} s: {[sorted(m.owned) for m in members]}")


def balanced(members: list[Member], partitions: int) -> bool:
    owned = [m.owned for m in members]
    covered = set().union(*owned)
    sizes = [len(o) for o in owned]
    return len(covered) == partitions and sum(sizes) == partitions and \
        max(sizes) - min(sizes) <= 1


def one_round(bootstrap: str, conf: dict[str, Any], members_n: int, partitions: int,
              timeout: float) -> tuple[float, float, int]:
    topic = f"rebalance-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions, 30.0)
    group = f"bench-{uuid.uuid4().hex}"
    start = time.perf_counter()
    members = [Member(bootstrap, group, topic, conf) for _ in range(members_n)]
    try:
        wait(members, lambda: balanced(members, partitions), timeout)
        joined = time.perf_counter() - start
        for m in members:
            m.lost = 0
        leaver, rest = members[-1], members[:-1]
        leaver.consumer.close()
        rebalanced = wait(rest, lambda: balanced(rest, partitions), timeout)
        stopped = sum(1 for m in rest if m.lost)
        return joined, rebalanced, stopped
    finally:
        for m in members[:-1]:
            m.consumer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per phase")
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)

    side = replace(parse_side("pybroker", None, None, None), overrides=BROKER_OVERRIDES)
    results: dict[str, dict[str, list[float]]] = {}
    for rep in range(args.repeat):
        for name, conf in PROTOCOLS.items():
            with BrokerRun(side, 60.0, None) as run:
                joined, rebalanced, stopped = one_round(run.bootstrap, conf, args.members,
                                                        args.partitions, args.timeout)
            r = results.setdefault(name, {"join_s": [], "rebalance_s": [], "stopped": []})
            r["join_s"].append(joined)
            r["rebalance_s"].append(rebalanced)
            r["stopped"].append(stopped)
            print(f"[{name}] rep {rep + 1}: join {joined:.3f} s, rebalance {rebalanced:.3f} s, "
                  f"{stopped} of {args.members - 1} members stopped", flush=True)
    print(f"\n{args.members} members, {args.partitions} partitions, median of {args.repeat}")
    print(f"  {'protocol':30} {'join':>9} {'rebalance':>10}  members stopped")
    for name, r in results.items():
        print(f"  {name:30} {statistics.median(r['join_s']):8.3f}s "
              f"{statistics.median(r['rebalance_s']):9.3f}s  "
              f"{statistics.median(r['stopped']):.0f} of {args.members - 1}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "benchmark": "group_rebalance",
            "command": "bench/group_rebalance.py " + " ".join(argv or sys.argv[1:]),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": machine_info(),
            "members": args.members, "partitions": args.partitions,
            "results": results,
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
