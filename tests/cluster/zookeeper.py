"""A real standalone ZooKeeper server for tests: Debian's `zookeeper` package run as a
subprocess (ZooKeeperServerMain) with a generated zoo.cfg on a free loopback port.

`shared_server()` / `release_shared_server()` hand one server to every test session
fixture that asks (tests/cluster and tests/coordination each register one), so a
pytest run starts ZooKeeper at most once. Each test gets its own chroot
(`server.connect_string("/some-test")`) instead of its own server.

Environment:
  PYBROKER_ZOOKEEPER_CLASSPATH  classpath holding ZooKeeper's server classes
                                (default: Debian's /usr/share/java/zookeeper.jar, whose
                                manifest names its dependencies)
  JAVA                          the java binary (default: java on PATH)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DEBIAN_CLASSPATH = "/usr/share/java/zookeeper.jar"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
#: ZooKeeper's clock: sessions expire on tick boundaries, and the smallest session
#: timeout is 2 ticks. Short ticks make expiry tests quick.
TICK_TIME_MS = 250
LOG_TAIL_BYTES = 4000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def classpath() -> str:
    return os.environ.get("PYBROKER_ZOOKEEPER_CLASSPATH", DEBIAN_CLASSPATH)


def unavailable_reason() -> str | None:
    """Why a ZooKeeper server cannot be started here, or None if it can."""
    java = os.environ.get("JAVA") or shutil.which("java")
    if not java:
        return "java is not installed"
    first = classpath().split(os.pathsep)[0]
    if not Path(first).exists():
        return f"ZooKeeper is not installed ({first} missing; apt-get install zookeeper)"
    return None


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 2.0) -> str:
    """Send a 4lw command (ruok, srvr, stat, ...) and return the whole answer."""
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.settimeout(timeout_s)
        s.sendall(word.encode())
        chunks = []
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


#: the test server's JVM: a small heap, the serial collector and the client compiler only
#: start it quickly and keep it small beside many others; not what an operator runs
TEST_JVM_FLAGS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
#: a production ZooKeeper's JVM as ZooKeeper's own zkServer.sh starts it (zkEnv.sh's
#: default ZK_SERVER_HEAP of 1000 MB; the JVM's default collector, G1, and its full
#: tiered compiler), for benchmarks whose figures depend on ZooKeeper's speed
PRODUCTION_JVM_FLAGS = ("-Xmx1000m",)


class ZooKeeperServer:
    """`production=True`: the JVM as zkServer.sh starts it and ZooKeeper's own defaults
    for durability (forceSync=yes: the transaction log is fsynced before a write is
    answered; snapCount and preAllocSize are left at their defaults in both modes), for
    benchmarks. The default is the quick test server (no fsync, see config_text)."""

    def __init__(self, base_dir: Path, port: int | None = None,
                 production: bool = False) -> None:
        self.production = production
        self.base_dir = base_dir
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = base_dir / "zookeeper.log"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """zookeeper.connect for this server, e.g. 127.0.0.1:2181/pybroker."""
        return self.address + chroot

    def config_text(self) -> str:
        return "\n".join([
            f"tickTime={TICK_TIME_MS}",
            f"dataDir={self.base_dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            f"minSessionTimeout={2 * TICK_TIME_MS}",
            "maxSessionTimeout=60000",
            "maxClientCnxns=0",
            # the test JVM is short lived: no snapshot purging, no fsync per write
            f"forceSync={'yes' if self.production else 'no'}",
            "",
        ])

    def start(self) -> ZooKeeperServer:
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        (self.base_dir / "data").mkdir(parents=True, exist_ok=True)
        config = self.base_dir / "zoo.cfg"
        config.write_text(self.config_text())
        java = os.environ.get("JAVA") or shutil.which("java") or "java"
        flags = PRODUCTION_JVM_FLAGS if self.production else TEST_JVM_FLAGS
        command = [java, *flags, "-Dzookeeper.jmx.log4j.disable=true", "-cp", classpath(),
                   MAIN_CLASS, str(config)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.wait_ready(START_TIMEOUT_S)
        return self

    def is_ready(self) -> bool:
        try:
            return four_letter_word(self.host, self.port, "ruok", 1.0) == "imok"
        except OSError:
            return False

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            if self.is_ready() and "Mode: standalone" in self.srvr():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer ruok within {timeout_s}s:\n"
                           f"{self.log_tail()}")

    def srvr(self) -> str:
        try:
            return four_letter_word(self.host, self.port, "srvr")
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)

    def log_tail(self) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "(no log)"
        return data[-LOG_TAIL_BYTES:].decode(errors="replace")


_lock = threading.Lock()
_shared: ZooKeeperServer | None = None
_shared_dir: tempfile.TemporaryDirectory[str] | None = None
_users = 0


def shared_server() -> ZooKeeperServer:
    """The process-wide test server, started on first use (pair with release)."""
    global _shared, _shared_dir, _users
    with _lock:
        if _shared is None:
            _shared_dir = tempfile.TemporaryDirectory(prefix="pybroker-zk-")
            _shared = ZooKeeperServer(Path(_shared_dir.name)).start()
        _users += 1
        return _shared


def release_shared_server() -> None:
    global _shared, _shared_dir, _users
    with _lock:
        _users -= 1
        if _users > 0 or _shared is None:
            return
        _shared.stop()
        _shared = None
        if _shared_dir is not None:
            _shared_dir.cleanup()
            _shared_dir = None


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    """The shared ZooKeeper server; tests are skipped when ZooKeeper is not installed."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    server = shared_server()
    try:
        yield server
    finally:
        release_shared_server()
