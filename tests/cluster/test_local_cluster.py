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
STOP_TIMEOUT_S = 180.0


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


def local_cluster(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", "local-cluster", "--base-dir",
                           str(base), *args], capture_output=True, text=True,
                          timeout=START_TIMEOUT_S + STOP_TIMEOUT_S, stdin=subprocess.DEVNULL)


def describe_leader(bootstrap: str, topic: str) -> tuple[int, str]:
    """Partition 0's leader and ISR, as `pybroker topics --describe` prints them."""
    out = subprocess.run([sys.executable, "-m", "pybroker", "topics", "--bootstrap-server",
                          bootstrap, "--describe", "--topic", topic], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL).stdout
    fields = dict(part.split(": ", 1) for part in out.splitlines()[-1].strip().split("\t"))
    return int(fields["Leader"]), fields["Isr"]


def test_local_cluster_in_the_background_survives_a_broker_killed_on_purpose(
        tmp_path: Path) -> None:
    """--background, then kill N (the leader): the cluster runs on, the leadership moves,
    status says so, start N brings the broker back, pause/resume, stop, purge."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path / "play"
    port, zk_port = free_ports(3), free_ports(1)
    started = local_cluster(base, "--brokers", "3", "--port", str(port), "--zookeeper-port",
                            str(zk_port), "--background")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        bootstrap = f"127.0.0.1:{port},127.0.0.1:{port + 1},127.0.0.1:{port + 2}"
        assert f"Bootstrap servers: {bootstrap}" in started.stdout.splitlines()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("failover", 1, 3)])["failover"].result(60)
        wait_for(lambda: describe_leader(bootstrap, "failover")[0] > 0, 60, "a leader")
        leader, _ = describe_leader(bootstrap, "failover")

        killed = local_cluster(base, "kill", str(leader))
        assert killed.returncode == 0, killed.stderr
        assert killed.stdout.startswith(f"broker {leader} killed (kill -9 "), killed.stdout
        wait_for(lambda: describe_leader(bootstrap, "failover")[0] not in (leader, -1), 60,
                 "the leadership to move off the killed broker")
        status = local_cluster(base, "status").stdout.splitlines()
        assert f"broker {leader}   127.0.0.1:{port + leader - 1}  down" in status, status
        assert sum(" running (pid " in line for line in status) == 3, status  # ZK + 2
        # the watcher said so, and runs on
        log = (base / "local-cluster.log").read_text()
        assert (f"broker {leader} (status -9) is down; the cluster runs on without it"
                in log), log

        restarted = local_cluster(base, "start", str(leader))
        assert restarted.returncode == 0, restarted.stderr
        wait_for(lambda: describe_leader(bootstrap, "failover")[1].count(",") == 2, 90,
                 "the restarted broker to rejoin the ISR")

        other = leader % 3 + 1
        paused = local_cluster(base, "pause", str(other))
        assert paused.returncode == 0, paused.stderr
        assert f"broker {other}   127.0.0.1:{port + other - 1}  paused (pid " in \
            local_cluster(base, "status").stdout
        assert local_cluster(base, "resume", str(other)).returncode == 0

        refused = local_cluster(base, "purge")
        assert refused.returncode == 1 and "stop first" in refused.stderr, refused.stderr
        assert base.exists()
    finally:
        stopped = local_cluster(base, "stop")
    assert stopped.returncode == 0, stopped.stderr
    for p in (port, port + 1, port + 2, zk_port):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", p)) != 0, f"port {p} still open"
    # logs are kept until purge
    assert "shut down cleanly" in (base / f"broker-{other}.log").read_text()
    purged = local_cluster(base, "purge")
    assert purged.returncode == 0, purged.stderr
    assert not base.exists()


def test_local_cluster_actions_refuse_what_they_cannot_do(tmp_path: Path) -> None:
    missing = local_cluster(tmp_path, "status")
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"no local cluster in {tmp_path} (no cluster.json)"
    no_id = subprocess.run([sys.executable, "-m", "pybroker", "local-cluster", "kill"],
                           capture_output=True, text=True, timeout=60)
    assert no_id.returncode == 1 and "needs --base-dir" in no_id.stderr, no_id.stderr
