#!/usr/bin/env python3
"""A single-node broker's restart with many logs, no cluster (issue 25).

Where a restart at 10,000 partitions spends its time before it serves, without the
replication and ZooKeeper parts of `bench/controller.py --cluster`:

1. Once per ``--template`` dir: a fresh ``pybroker serve`` gets ``--partitions``
   partitions as 100-partition topics and ``--records`` small records in each, and is
   stopped cleanly. The dir is kept (``.built`` marks it) and reused by later runs.
2. Per repeat: the broker is started on the template's dir and timed from its
   ``Popen`` to ApiVersions answered (its logs are opened before it listens) and to a
   full Metadata answer, first after the template's clean stop, then after a kill -9 of
   that broker (its logs are recovered from their recovery points). The broker's own
   lines give the log opens ("loaded N logs ... in X s") and the phases ("started in").

Before/after pairs: run it with ``PYTHONPATH=<older checkout>/python`` for the other
side (the broker is started as ``python -m pybroker`` by this interpreter).

    python bench/restart_logs.py --template /tmp/restart10k --partitions 10000 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
LINE_RE = re.compile(r"(loaded \d+ logs.*|started in .*)$")


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


class Broker:
    def __init__(self, data_dir: Path, logs: Path, pycache: Path) -> None:
        self.data_dir, self.logs, self.port = data_dir, logs, free_port()
        self.pycache = pycache
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path = logs

    def start(self, timeout: float) -> dict[str, Any]:
        self.starts += 1
        self.log_path = self.logs / f"broker-{self.starts}.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPYCACHEPREFIX=str(self.pycache))
        # an installed broker has its bytecode (kept beside the template: one tree per
        # source path, so both sides of a pair keep theirs)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cmd = [sys.executable, "-m", "pybroker", "serve",
               "--override", f"listeners=PLAINTEXT://{LOOPBACK}:{self.port}",
               "--override", f"log.dirs={self.data_dir}"]
        with open(self.log_path, "wb") as out:
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        _LIVE.append(self.proc)
        deadline = t0 + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited: {self.log_path.read_text()[-2000:]}")
            if time.perf_counter() > deadline:
                raise TimeoutError(f"not listening after {timeout} s")
            try:
                if api_versions(LOOPBACK, self.port, 2.0):
                    break
            except OSError:
                pass
            time.sleep(0.005)
        listening = time.perf_counter() - t0
        admin = AdminClient({"bootstrap.servers": f"{LOOPBACK}:{self.port}", "log_level": 0})
        md = admin.list_topics(timeout=max(1.0, deadline - time.perf_counter()))
        metadata = time.perf_counter() - t0
        led = sum(1 for t in md.topics.values() for p in t.partitions.values() if p.leader >= 0)
        time.sleep(0.3)  # the "loaded" line is logged once the burst is quiet
        lines = [m.group(1) for m in map(LINE_RE.search,
                                         self.log_path.read_text().splitlines()) if m]
        return {"listening_s": round(listening, 3), "metadata_s": round(metadata, 3),
                "partitions_led": led, "lines": lines}

    def stop(self) -> None:
        assert self.proc is not None
        _stop_process(self.proc, grace=300.0)
        self.proc = None

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        _stop_process(self.proc)
        self.proc = None


def build(template: Path, partitions: int, records: int, timeout: float) -> None:
    if (template / ".built").exists():
        return
    shutil.rmtree(template, ignore_errors=True)
    (template / "data").mkdir(parents=True)
    work = Path(tempfile.mkdtemp(prefix="restart-build-"))
    broker = Broker(template / "data", work, template / "pycache")
    broker.start(timeout)
    bootstrap = f"{LOOPBACK}:{broker.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    topics = [f"r{i:04d}" for i in range(partitions // PER_TOPIC)]
    t0 = time.perf_counter()
    for name in topics:
        admin.create_topics([NewTopic(name, PER_TOPIC, 1)])[name].result(timeout)
    print(f"created {len(topics)} topics in {time.perf_counter() - t0:.1f} s", flush=True)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    for n, name in enumerate(topics):
        for p in range(PER_TOPIC):
            for r in range(records):
                producer.produce(name, f"record {r}".encode(), partition=p)
        # a topic at a time: librdkafka with 10,000 partitions in flight at once stalled
        assert producer.flush(timeout) == 0, f"{name}: records not acknowledged"
        if n % 10 == 9:
            print(f"produced to {n + 1} topics", flush=True)
    broker.stop()
    (template / ".built").touch()
    shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", type=Path, required=True)
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--records", type=int, default=3, help="records per partition")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--skip-kill", action="store_true", help="only the clean restart")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # atexit stops the brokers
    build(args.template, args.partitions, args.records, args.timeout)
    import pybroker
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        work = Path(tempfile.mkdtemp(prefix="restart-run-"))
        try:
            # the template's own dir: each repeat ends with a clean stop, as it began
            # (copying 10,000 dirs took over 4 minutes on a loaded machine's disk)
            broker = Broker(args.template / "data", work, args.template / "pycache")
            for kind in ("clean", "kill9"):
                if kind == "kill9":
                    if args.skip_kill:
                        break
                    broker.kill9()
                before = load()
                marked = (broker.data_dir / ".kafka_cleanshutdown").exists()
                if kind == "clean" and not marked:
                    print("warning: the dir was not shut down cleanly (an interrupted run): "
                          "this start recovers", flush=True)
                got = broker.start(args.timeout)
                got["clean_marker"] = marked
                got.update(kind=kind, rep=rep, load=f"{before} / {load()}")
                runs.append(got)
                print(f"{kind} rep {rep}: listening {got['listening_s']} s, metadata "
                      f"{got['metadata_s']} s, {got['partitions_led']} led, load "
                      f"{got['load']}", flush=True)
                for line in got["lines"]:
                    print(f"    {line}", flush=True)
            broker.stop()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"pybroker": pybroker.__file__, "runs": runs},
                                        indent=1))


if __name__ == "__main__":
    main()
