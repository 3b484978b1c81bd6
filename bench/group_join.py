#!/usr/bin/env python3
"""Time from subscribe() to the first record for a new consumer group.

For each side (pybroker, a peer), a fresh broker gets a topic with records in it; then a
new confluent-kafka consumer with a fresh group.id subscribes and polls until the first
record arrives. The clock covers FindCoordinator, JoinGroup (and the broker's initial
rebalance delay), SyncGroup, OffsetFetch, ListOffsets and the first Fetch. pybroker runs
with group.initial.rebalance.delay.ms=0 (the issue's setting; Kafka's default is 3000).

    python bench/group_join.py --peer tansu --repeat 5
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import BrokerRun, create_topic, machine_info, parse_side  # noqa: E402

try:
    from confluent_kafka import Consumer, Producer
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install '.[bench]'")


def time_to_first_record(bootstrap: str, partitions: int, timeout: float) -> float:
    topic = f"join-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions, 30.0)
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for i in range(100):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    producer.flush(30)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex}",
        "auto.offset.reset": "earliest",
        "log_level": 0,
    })
    try:
        start = time.perf_counter()
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                return time.perf_counter() - start
        raise RuntimeError(f"no record within {timeout} s")
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="pybroker", help="pybroker, tansu or HOST:PORT")
    ap.add_argument("--peer", default="tansu", help="pybroker, tansu, HOST:PORT or none")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per attempt")
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)

    sides = [parse_side(args.target, None, None, None)]
    if args.peer != "none":
        sides.append(parse_side(args.peer, None, None, None))
    sides = [replace(s, overrides=("group.initial.rebalance.delay.ms=0",))
             if s.kind == "pybroker" else s for s in sides]
    times: dict[str, list[float]] = {s.label: [] for s in sides}
    for rep in range(args.repeat):
        for side in sides:
            with BrokerRun(side, 60.0, None) as run:
                seconds = time_to_first_record(run.bootstrap, args.partitions, args.timeout)
            times[side.label].append(seconds)
            print(f"[{side.label}] rep {rep + 1}: {seconds:.3f} s", flush=True)
    print(f"\nsubscribe -> first record, new group, {args.partitions} partitions "
          f"(median of {args.repeat})")
    for label, values in times.items():
        print(f"  {label:12} {statistics.median(values):8.3f} s   "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "benchmark": "group_join",
            "command": "bench/group_join.py " + " ".join(argv or sys.argv[1:]),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": machine_info(),
            "seconds": times,
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
