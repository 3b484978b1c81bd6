#!/usr/bin/env python3
"""One producer to many partitions of one broker: does it stall? (bench/RESULTS.md,
"One producer to 10,000 partitions on one broker")

One ``pybroker serve`` gets ``--partitions`` partitions as 100-partition topics (RF 1),
once. Then per run a fresh ``confluent_kafka.Producer`` (defaults, ``linger.ms=5``)
produces ``--records`` records to every partition and polls until every record is
acknowledged, bounded by ``--bound`` seconds. librdkafka pipelines one small Produce
request per partition on its one connection; with Kafka's default 102,400-byte socket
buffers a broker that stops reading while its own send is blocked stalled ~60 s
(librdkafka's ``socket.timeout.ms``, then a retry).

Printed per run: the longest time without an acknowledgement (from the first
``produce()`` call), the records unacknowledged at the bound, the load; at the end the
number of runs with a stall (a gap over ``--stall`` seconds or records left).

Before/after: ``--side before=<older checkout>/python --side after=<this checkout>/python``
starts one broker per side (``python -m pybroker`` of this interpreter with that
PYTHONPATH, the checkout's own extension beside its sources) and alternates the runs.

    python bench/produce_fanout.py --runs 10
    python bench/produce_fanout.py --runs 10 --side before=/tmp/old/python --side after=python
    python bench/produce_fanout.py --runs 5 --override socket.receive.buffer.bytes=-1
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lifecycle import api_versions  # noqa: E402
from throughput import _LIVE, LOOPBACK, _stop_process, free_port  # noqa: E402

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PER_TOPIC = 100


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def start_broker(data_dir: Path, log_path: Path, overrides: list[str], timeout: float,
                 pythonpath: str = "") -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "pybroker", "serve",
           "--override", f"listeners=PLAINTEXT://{LOOPBACK}:{port}",
           "--override", f"log.dirs={data_dir}"]
    for item in overrides:
        cmd += ["--override", item]
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT,
                                env=dict(os.environ, PYTHONUNBUFFERED="1",
                                         **({"PYTHONPATH": pythonpath} if pythonpath else {})),
                                start_new_session=True)
    _LIVE.append(proc)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited: {log_path.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not listening after {timeout} s")
        try:
            if api_versions(LOOPBACK, port, 2.0):
                return proc, f"{LOOPBACK}:{port}"
        except OSError:
            pass
        time.sleep(0.05)


def create_topics(bootstrap: str, partitions: int, timeout: float) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    topics = [f"fan{i:04d}" for i in range(partitions // PER_TOPIC)]
    for i in range(0, len(topics), 10):  # 100 topics in one request outlast its timeout
        futures = admin.create_topics([NewTopic(t, PER_TOPIC, 1) for t in topics[i:i + 10]],
                                      request_timeout=timeout)
        for f in futures.values():
            f.result(timeout)
    # every partition led before the clock starts (metadata answers -1 until then)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=timeout)
        led = sum(1 for t in topics if t in md.topics
                  for p in md.topics[t].partitions.values() if p.leader >= 0)
        if led == len(topics) * PER_TOPIC:
            return topics
        time.sleep(0.5)
    raise TimeoutError("partitions without a leader")


def one_run(bootstrap: str, topics: list[str], records: int, bound: float) -> dict[str, Any]:
    """Produce `records` records to every partition; the longest gap without an ack."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    acked = failed = 0
    gap = {"last": 0.0, "longest": 0.0}

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal acked, failed
        if err is None:
            acked += 1
        else:
            failed += 1
        now = time.monotonic()
        gap["longest"] = max(gap["longest"], now - gap["last"])
        gap["last"] = now

    total = len(topics) * PER_TOPIC * records
    t0 = gap["last"] = time.monotonic()
    for name in topics:
        for p in range(PER_TOPIC):
            for r in range(records):
                producer.produce(name, f"record {r}".encode(), partition=p,
                                 on_delivery=on_delivery)
        producer.poll(0)
    deadline = t0 + bound
    while acked + failed < total and time.monotonic() < deadline:
        producer.poll(0.1)
    longest = gap["longest"]
    if acked + failed < total:
        longest = max(longest, time.monotonic() - gap["last"])
    left = total - acked - failed
    failed_before = failed
    producer.purge()
    producer.flush(1)
    return {"seconds": round(time.monotonic() - t0, 2), "longest_gap_s": round(longest, 2),
            "acked": acked, "failed": failed_before, "unacknowledged": left}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--records", type=int, default=3, help="records per partition")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--bound", type=float, default=90.0,
                    help="seconds a run may take before its records count as stalled")
    ap.add_argument("--stall", type=float, default=10.0,
                    help="a gap without an acknowledgement longer than this is a stall")
    ap.add_argument("--override", action="append", default=[],
                    help="a broker config key=value (repeatable)")
    ap.add_argument("--side", action="append", default=[], metavar="LABEL=PYTHONPATH",
                    help="a broker run with this PYTHONPATH (repeatable; runs alternate "
                         "between sides, each on its own broker); default: this checkout")
    ap.add_argument("--timeout", type=float, default=600, help="startup and topic creation")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # atexit stops the broker
    sides = [tuple(item.split("=", 1)) for item in args.side] or [("this", "")]
    print(f"sides {sides}, overrides {args.override or 'none'}, load {load()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="fanout-"))
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in sides}
    brokers: dict[str, tuple[subprocess.Popen[bytes], str, list[str]]] = {}
    try:
        for label, path in sides:
            (work / label).mkdir()
            proc, bootstrap = start_broker(work / label, work / f"{label}.log",
                                           args.override, args.timeout, path)
            t0 = time.monotonic()
            topics = create_topics(bootstrap, args.partitions, args.timeout)
            print(f"{label}: {len(topics) * PER_TOPIC} partitions in "
                  f"{time.monotonic() - t0:.1f} s", flush=True)
            brokers[label] = (proc, bootstrap, topics)
        for n in range(args.runs):
            for label, _ in sides:
                _, bootstrap, topics = brokers[label]
                got = one_run(bootstrap, topics, args.records, args.bound)
                got["stalled"] = (got["longest_gap_s"] > args.stall
                                  or got["unacknowledged"] > 0)
                got["load"] = load()
                runs[label].append(got)
                print(f"{label} run {n}: {got['seconds']} s, longest gap "
                      f"{got['longest_gap_s']} s, {got['unacknowledged']} unacknowledged, "
                      f"{'STALL' if got['stalled'] else 'ok'}, load {got['load']}",
                      flush=True)
    finally:
        for proc, _, _ in brokers.values():
            _stop_process(proc)
        shutil.rmtree(work, ignore_errors=True)
    for label, got_runs in runs.items():
        stalls = sum(r["stalled"] for r in got_runs)
        worst = max((r["longest_gap_s"] for r in got_runs), default=0.0)
        print(f"{label}: stalls {stalls} of {len(got_runs)} runs, longest gap {worst} s",
              flush=True)
    print(f"load {load()}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"sides": sides, "overrides": args.override,
                                         "runs": runs}, indent=1))

if __name__ == "__main__":
    main()
