#!/usr/bin/env python3
"""Broker CPU per fetch for a consumer of many partitions, with and without incremental
fetch sessions (KIP-227).

For each mode a fresh pybroker gets a topic of --partitions partitions; a kafka-python
consumer (it keeps fetch sessions) is assigned all of them and polls for --seconds while
a trickle producer writes --rate records/s to random partitions. "without" runs the
broker with max.incremental.fetch.session.cache.slots=0: it never grants a session, so
every fetch names (and every answer describes) every partition, as before sessions.
"baseline" runs the broker from another source tree (--baseline-src, e.g. a checkout of
the commit before sessions, with the built pybroker/_core next to its sources), slots
left at their default.
Reported: fetches answered (the broker's pybroker_requests_total{api="Fetch"}), broker
CPU (user + sys, psutil) over the measured window, CPU per fetch, and the mean size of
the consumer's fetch requests (the broker's view, from a counting proxy in this script).

    python bench/fetch_sessions.py --partitions 1000 --seconds 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

try:
    import psutil
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install '.[bench,test]'")

FETCH = 1
READY_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CountingProxy:
    """Forwards a port to the broker, adding up the sizes of Fetch requests."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.target = target
        self.fetches = 0
        self.fetch_bytes = 0
        self._server = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        self.fetches = self.fetch_bytes = 0

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._up, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client), daemon=True).start()

    def _up(self, src: socket.socket, dst: socket.socket) -> None:
        buf = bytearray()
        try:
            while data := src.recv(65536):
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    size = struct.unpack_from(">i", buf)[0]
                    if struct.unpack_from(">h", buf, 4)[0] == FETCH:
                        self.fetches += 1
                        self.fetch_bytes += size
                    dst.sendall(bytes(buf[:4 + size]))
                    del buf[:4 + size]
        except OSError:
            pass

    @staticmethod
    def _down(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self._server.close()


def fetch_count(metrics_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",  # noqa: S310
                                timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith('pybroker_requests_total{api="Fetch"}'):
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def settle(broker: psutil.Process, timeout_s: float = 300.0) -> None:
    """Wait until the broker is idle: creating a topic of many partitions keeps it busy
    (applying partition states) for a while after CreateTopics has answered."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = sum(broker.cpu_times()[:2])
        time.sleep(2.0)
        if sum(broker.cpu_times()[:2]) - before < 0.1:
            return
    raise RuntimeError("the broker did not settle after creating the topic")


def run(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    port, proxy_port, metrics_port = free_port(), free_port(), free_port()
    slots = 0 if mode == "without" else 1000
    env = dict(os.environ)
    if mode == "baseline":
        env["PYTHONPATH"] = str(args.baseline_src / "python")
    with tempfile.TemporaryDirectory(prefix="bench-fetch-sessions-") as data:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pybroker", "serve",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy_port}",
             "--override", f"log.dirs={data}", "--override", f"metrics.port={metrics_port}",
             *([] if mode == "baseline" else
               ["--override", f"max.incremental.fetch.session.cache.slots={slots}"])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        proxy = CountingProxy(proxy_port, ("127.0.0.1", port))
        stop = threading.Event()
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while True:
                try:
                    fetch_count(metrics_port)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            bootstrap = f"127.0.0.1:{proxy_port}"
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
            admin.create_topics([NewTopic("wide", args.partitions, 1)],
                                operation_timeout=300, request_timeout=300)["wide"].result(330)
            broker = psutil.Process(proc.pid)
            settle(broker)
            producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)

            def trickle() -> None:
                while not stop.is_set():
                    producer.send("wide", b"x" * 100, partition=random.randrange(args.partitions))
                    stop.wait(1 / args.rate if args.rate > 0 else 1.0)

            consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                     fetch_max_wait_ms=args.max_wait_ms)
            consumer.assign([TopicPartition("wide", i) for i in range(args.partitions)])
            consumer.seek_to_end()
            warm_until = time.monotonic() + args.warmup
            while time.monotonic() < warm_until:
                consumer.poll(timeout_ms=100)
            if args.rate > 0:
                threading.Thread(target=trickle, daemon=True).start()
            cpu0 = sum(broker.cpu_times()[:2])
            fetches0 = fetch_count(metrics_port)
            proxy.reset()
            records = 0
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                records += sum(len(v) for v in consumer.poll(timeout_ms=100).values())
            cpu = sum(broker.cpu_times()[:2]) - cpu0
            fetches = fetch_count(metrics_port) - fetches0
            request_bytes = proxy.fetch_bytes / proxy.fetches if proxy.fetches else 0.0
            stop.set()
            consumer.close()
            producer.close()
        finally:
            stop.set()
            proxy.close()
            proc.terminate()
            proc.wait(30)
    return {"mode": mode, "partitions": args.partitions, "seconds": args.seconds,
            "fetches": fetches, "records": records, "broker_cpu_s": round(cpu, 3),
            "cpu_ms_per_fetch": round(1000 * cpu / fetches, 3) if fetches else None,
            "fetch_request_bytes": round(request_bytes)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=50.0, help="records/s produced")
    parser.add_argument("--max-wait-ms", type=int, default=100,
                        help="the consumer's fetch.max.wait.ms")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--modes", nargs="+", default=["without", "with"],
                        choices=["baseline", "without", "with"])
    parser.add_argument("--baseline-src", type=Path,
                        help="source tree the baseline broker runs from")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results = [run(mode, args) for _ in range(args.repeat) for mode in args.modes]
    print("| sessions | fetches | records | broker CPU s | CPU ms/fetch | fetch request B |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['mode']} | {r['fetches']} | {r['records']} | {r['broker_cpu_s']} | "
              f"{r['cpu_ms_per_fetch']} | {r['fetch_request_bytes']} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
