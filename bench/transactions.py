#!/usr/bin/env python3
"""Transactional produce against plain idempotent produce (issue 13).

One confluent-kafka producer writes 100 B records to a topic for --seconds:

- idempotent: enable.idempotence=true, acks=all; records/s acknowledged;
- transactional: the same, inside transactions committed every --commit-ms
  (100 ms by default); records/s committed, and the commit_transaction()
  latency (EndTxn, then the coordinator's markers in the background).

A fresh pybroker is started for the run (or --bootstrap HOST:PORT for a running
broker, pybroker or Kafka). The records of the transactional run are read back
with read_committed to check every one of them is there.

    python bench/transactions.py --seconds 10 --partitions 4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import BrokerRun, create_topic, machine_info, parse_side  # noqa: E402

try:
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install '.[bench]'")

VALUE = b"x" * 100
#: produce() calls between polls of the delivery reports
POLL_EVERY = 1000


def run_idempotent(bootstrap: str, topic: str, seconds: float) -> dict[str, Any]:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "linger.ms": 5, "log_level": 0})
    # no per-record delivery callback (the transactional run has none either: a
    # Python call per record would be what is measured); flush() leaving nothing
    # behind means every record was acknowledged
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < seconds:
        try:
            p.produce(topic, VALUE)
            sent += 1
        except BufferError:
            p.poll(0.01)
        if sent % POLL_EVERY == 0:
            p.poll(0)
    if p.flush(60) != 0:
        raise RuntimeError("idempotent records left undelivered")
    delivered = sent
    elapsed = time.perf_counter() - start
    return {"records": delivered, "seconds": round(elapsed, 2),
            "records_per_s": round(delivered / elapsed)}


def run_transactional(bootstrap: str, topic: str, seconds: float,
                      commit_ms: float) -> dict[str, Any]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0,
                  "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    committed = 0
    commits: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        p.begin_transaction()
        in_txn = 0
        txn_start = time.perf_counter()
        while time.perf_counter() - txn_start < commit_ms / 1000:
            try:
                p.produce(topic, VALUE)
                in_txn += 1
            except BufferError:
                p.poll(0.01)
            if in_txn % POLL_EVERY == 0:
                p.poll(0)
        t = time.perf_counter()
        p.commit_transaction(60)
        commits.append((time.perf_counter() - t) * 1000)
        committed += in_txn
    elapsed = time.perf_counter() - start
    commits.sort()
    return {"records": committed, "seconds": round(elapsed, 2),
            "records_per_s": round(committed / elapsed), "transactions": len(commits),
            "commit_ms_p50": round(statistics.median(commits), 1),
            "commit_ms_p99": round(commits[int(len(commits) * 0.99) - 1], 1)}


def count_committed(bootstrap: str, topic: str, partitions: int, timeout: float) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check",
                  "isolation.level": "read_committed", "enable.partition.eof": True,
                  "auto.offset.reset": "earliest", "log_level": 0})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count, eof = 0, set()
    deadline = time.monotonic() + timeout
    while len(eof) < partitions and time.monotonic() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                count += 1
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
    c.close()
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="a running broker (default: start a pybroker)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--commit-ms", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds, alternating which mode goes first; medians reported")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    side = parse_side(args.bootstrap or "pybroker", None, None, None)
    with BrokerRun(side, 60.0, None) as broker:
        results: dict[str, Any] = {"machine": machine_info(), "seconds": args.seconds,
                                   "partitions": args.partitions, "commit_ms": args.commit_ms,
                                   "record_bytes": len(VALUE)}
        rounds: list[dict[str, Any]] = []
        for round_ in range(args.repeat):
            idem_topic = f"bench-idem-{uuid.uuid4().hex[:6]}"
            txn_topic = f"bench-txn-{uuid.uuid4().hex[:6]}"
            create_topic(broker.bootstrap, idem_topic, args.partitions, 30.0)
            create_topic(broker.bootstrap, txn_topic, args.partitions, 30.0)
            one: dict[str, Any] = {}
            order = ["idempotent", "transactional"]
            if round_ % 2:
                order.reverse()
            for mode in order:
                if mode == "idempotent":
                    one[mode] = run_idempotent(broker.bootstrap, idem_topic, args.seconds)
                else:
                    one[mode] = run_transactional(broker.bootstrap, txn_topic, args.seconds,
                                                  args.commit_ms)
                    one[mode]["read_committed_records"] = count_committed(
                        broker.bootstrap, txn_topic, args.partitions, 120.0)
            rounds.append(one)
        results["rounds"] = rounds
        for mode in ("idempotent", "transactional"):
            results[f"{mode}_records_per_s_median"] = statistics.median(
                r[mode]["records_per_s"] for r in rounds)
        results["commit_ms_p50_median"] = statistics.median(
            r["transactional"]["commit_ms_p50"] for r in rounds)
        results["ratio"] = round(results["transactional_records_per_s_median"]
                                 / max(1, results["idempotent_records_per_s_median"]), 3)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    ok = all(r["transactional"]["read_committed_records"] == r["transactional"]["records"]
             for r in results["rounds"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
