"""The live run's broker process and the acknowledged records it must keep.

``BrokerProcess`` runs ``pybroker serve`` on loopback and reads its log;
``usage`` samples its RSS, fds and sockets from /proc. ``KnownProducer`` (and its
``Trickle`` thread) produce with confluent-kafka, acks=all, remembering every
acknowledged (partition, offset) -> (key, value); ``read_back`` consumes them
again and compares.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from pybroker.protocol import decode_response, encode_request

from .strategies import PLAYGROUND

HOST = "127.0.0.1"
#: no corpus request names it: only a defect can touch its records
KNOWN_TOPIC = "pybroker-fuzz-live-known-data"
KNOWN_PARTITIONS = 3
PLAYGROUND_PARTITIONS = (1, 3)
API_VERSIONS, CREATE_TOPICS = 18, 19
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 10.0
READ_BACK_TIMEOUT_S = 120.0
#: differences listed by read_back (the count is always whole)
BAD_SAMPLES = 20


class BrokerProcess:
    def __init__(self, data_dir: Path, port: int, overrides: dict[str, str]) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self.overrides = overrides
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self) -> None:
        settings = {"listeners": f"PLAINTEXT://{HOST}:{self.port}", "log.dirs": str(self.data_dir),
                    **self.overrides}
        cmd = [sys.executable, "-m", "pybroker", "serve"]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.tail()}")
            if api_versions_ok(self.port):
                return
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"broker not ready in {START_TIMEOUT_S}s:\n{self.tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def log_problems(self) -> tuple[list[str], int]:
        """(ERROR/CRITICAL lines and tracebacks, count of WARNING lines) of the log."""
        errors: list[str] = []
        warnings_count = 0
        with open(self.log_path, errors="replace") as log:
            for line in log:
                if " WARNING " in line:
                    warnings_count += 1
                elif " ERROR " in line or " CRITICAL " in line or line.startswith("Traceback"):
                    errors.append(line.rstrip())
        return errors, warnings_count


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def api_versions_ok(port: int) -> bool:
    header = struct.pack(">hhih", API_VERSIONS, 0, 7, 1) + b"f"
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as s:
            s.sendall(struct.pack(">i", len(header)) + header)
            data = s.recv(10)
            return len(data) >= 10 and data[4:8] == struct.pack(">i", 7)
    except OSError:
        return False


def usage(proc: psutil.Process) -> tuple[float, int, int]:
    """(RSS MB, open fds, of which sockets) of the broker."""
    rss = proc.memory_info().rss / 2**20
    fd_dir = f"/proc/{proc.pid}/fd"
    fds = sockets = 0
    for name in os.listdir(fd_dir):
        fds += 1
        try:
            sockets += os.readlink(f"{fd_dir}/{name}").startswith("socket:")
        except OSError:
            pass
    return rss, fds, sockets


def settled_usage(proc: psutil.Process, target_sockets: int | None,
                  timeout: float) -> tuple[float, int, int]:
    """Usage once the socket count stops falling (or reaches target), bounded."""
    deadline = time.monotonic() + timeout
    last = usage(proc)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = usage(proc)
        if target_sockets is not None and now[2] <= target_sockets:
            return now
        if target_sockets is None and now[2] == last[2]:
            return now
        last = now
    return last


# ------------------------------------------------------------------------ known data


def known_value(i: int) -> bytes:
    digest = hashlib.sha256(b"%d" % i).digest()
    return digest * (1 + i % 31)


class KnownProducer:
    """confluent-kafka with acks=all; remembers each acknowledged record."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 30000})
        self.acked: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        self.failed = 0
        self.sent = 0

    def produce(self, i: int) -> None:
        key, value = b"key-%d" % i, known_value(i)

        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.acked[msg.partition(), msg.offset()] = (key, value)
            else:
                self.failed += 1

        while True:
            try:
                self.producer.produce(KNOWN_TOPIC, key=key, value=value,
                                      partition=i % KNOWN_PARTITIONS, on_delivery=done)
                break
            except BufferError:
                self.producer.poll(0.1)
        self.sent += 1
        self.producer.poll(0)

    def flush(self, timeout: float = 60.0) -> None:
        self.producer.flush(timeout)


class Trickle(threading.Thread):
    """Acknowledged records produced while the fuzzing runs."""

    def __init__(self, producer: KnownProducer, first: int, per_s: float) -> None:
        super().__init__(daemon=True)
        self.producer = producer
        self.next = first
        self.per_s = per_s
        self.stop_event = threading.Event()

    def run(self) -> None:
        while self.per_s > 0 and not self.stop_event.wait(1 / self.per_s):
            self.producer.produce(self.next)
            self.next += 1

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)


def admin_setup(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(KNOWN_TOPIC, KNOWN_PARTITIONS, 1)]
    topics += [NewTopic(n, p, 1) for n, p in zip(PLAYGROUND.topics, PLAYGROUND_PARTITIONS,
                                                 strict=True)]
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(timeout=60)


def raw_request(port: int, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """One valid request on a connection of its own; the decoded response body."""
    data = b"".join(encode_request(api_key, version, 1, "fuzz-live", body))
    with socket.create_connection((HOST, port), timeout=REQUEST_TIMEOUT_S) as s:
        s.sendall(data)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        _, decoded = decode_response(api_key, version, recv_exact(s, size))
    return decoded


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def ensure_playground(port: int) -> None:
    """Create the playground topics again (TOPIC_ALREADY_EXISTS is fine): raw request."""
    body = {"timeout_ms": 5000, "topics": [
        {"name": n, "num_partitions": p, "replication_factor": 1}
        for n, p in zip(PLAYGROUND.topics, PLAYGROUND_PARTITIONS, strict=True)]}
    data = b"".join(encode_request(CREATE_TOPICS, 4, 1, "fuzz-upkeep", body))
    try:
        with socket.create_connection((HOST, port), timeout=REQUEST_TIMEOUT_S) as s:
            s.sendall(data)
            s.recv(65536)
    except OSError:
        pass  # the tick that follows checks the broker


def read_back(bootstrap: str, acked: dict[tuple[int, int], tuple[bytes, bytes]],
              timeout: float = READ_BACK_TIMEOUT_S) -> tuple[int, list[str]]:
    """Consume the known topic from the start; (records intact, what was wrong)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fuzz-live-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    wanted = {p: max((o for q, o in acked if q == p), default=-1)
              for p in range(KNOWN_PARTITIONS)}
    consumer.assign([TopicPartition(KNOWN_TOPIC, p, 0) for p in range(KNOWN_PARTITIONS)])
    seen: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
    done = {p for p, last in wanted.items() if last < 0}
    deadline = time.monotonic() + timeout
    try:
        while len(done) < KNOWN_PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                if msg.error():
                    continue
                seen[msg.partition(), msg.offset()] = (msg.key(), msg.value())
                if msg.offset() >= wanted[msg.partition()]:
                    done.add(msg.partition())
    finally:
        consumer.close()
    bad = []
    intact = 0
    for where, record in sorted(acked.items()):
        got = seen.get(where)
        if got == record:
            intact += 1
        elif len(bad) < BAD_SAMPLES:
            bad.append(f"{where}: {'missing' if got is None else 'differs'}")
    return intact, bad
