"""`pybroker local-cluster`: starts its own ZooKeeper and N brokers, prints the bootstrap
string, serves a produce/consume round trip, and stops everything cleanly on SIGINT;
without ZooKeeper installed it says what to install."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster import wait_for
from tests.cluster.zookeeper import unavailable_reason

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 90.0


def free_ports(count: int) -> int:
    """A port p with p .. p + count - 1 all free right now."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        held = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no run of free ports")


def test_local_cluster_round_trip_and_sigint(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    port, zk_port = free_ports(2), free_ports(1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "local-cluster", "--brokers", "2", "--port",
         str(port), "--zookeeper-port", str(zk_port), "--base-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()],
                     daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any(s.startswith("Bootstrap servers: ") for s in seen):
            assert proc.poll() is None, f"local-cluster exited: {''.join(seen)}"
            assert time.monotonic() < deadline, f"no bootstrap line: {''.join(seen)}"
            try:
                seen.append(lines.get(timeout=1.0))
            except queue.Empty:
                pass
        bootstrap = f"127.0.0.1:{port},127.0.0.1:{port + 1}"
        assert f"Bootstrap servers: {bootstrap}\n" in seen

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("trial", 1, 2)])["trial"].result(60)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce("trial", value=f"m{i}".encode())
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["trial"])
        got: list[bytes] = []
        try:
            wait_for(lambda: got.extend(m.value() for m in consumer.consume(10, 1.0)
                                        if m.error() is None) or len(got) >= 10,
                     60, "the consumer to read the records back")
        finally:
            consumer.close()
        assert got == [f"m{i}".encode() for i in range(10)]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            status = proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    time.sleep(0.2)  # the reader thread drains the last lines
    while not lines.empty():
        seen.append(lines.get())
    assert status == 0, "".join(seen)
    assert seen[-1] == "Stopped.\n"
    for broker_id in (1, 2):
        assert "shut down cleanly" in (tmp_path / f"broker-{broker_id}.log").read_text()
    for p in (port, port + 1, zk_port):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", p)) != 0, f"port {p} still open"


def test_local_cluster_without_zookeeper_says_what_to_install(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pybroker", "local-cluster", "--brokers", "1", "--base-dir",
         str(tmp_path)], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYBROKER_ZOOKEEPER_CLASSPATH": str(tmp_path / "none.jar")})
    assert result.returncode == 1
    assert "apt-get install zookeeper" in result.stderr
    assert not list(tmp_path.iterdir())  # nothing started, nothing written
