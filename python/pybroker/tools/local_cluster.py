"""`pybroker local-cluster`: a ZooKeeper and N brokers on loopback, for trying cluster
mode on one machine.

    pybroker local-cluster --brokers 3

ZooKeeper is Debian's `zookeeper` package (its jar run with `java`, as the tests run
it; PYBROKER_ZOOKEEPER_CLASSPATH and JAVA point elsewhere); when it is not installed
the command says what to install and exits. Brokers 1..N listen on 127.0.0.1 from
--port on, each with its own data dir and log file under --base-dir (a temporary dir,
removed at the end, unless given). Once every broker knows all the others, the
bootstrap string is printed; Ctrl-C (SIGINT) or SIGTERM stops the brokers (cleanly,
SIGTERM each) and then ZooKeeper.

Children run in their own sessions, so a Ctrl-C in the terminal reaches only this
command, which then stops them in order: brokers first, ZooKeeper last."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pybroker.log.dir_lock import DirLock, DirLocked
from pybroker.tools._common import ToolError
from pybroker.tools._wire import WireClient

COMMAND = "local-cluster"
HELP = "start ZooKeeper and N brokers on loopback; Ctrl-C stops them (try cluster mode)"

ZOOKEEPER_CLASSPATH = "/usr/share/java/zookeeper.jar"
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = ("ZooKeeper is not installed. On Debian or Ubuntu: apt-get install zookeeper "
                "(it brings Java); or set PYBROKER_ZOOKEEPER_CLASSPATH to ZooKeeper's jars "
                "and JAVA to a java binary.")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
POLL_S = 0.2
#: the chroot the brokers share, so the ZooKeeper can hold other things too
CHROOT = "/pybroker"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    parser.add_argument("--port", type=int, default=9092,
                        help="port of broker 1; broker i listens on port + i - 1 (default 9092)")
    parser.add_argument("--zookeeper-port", type=int, default=2181,
                        help="ZooKeeper's client port (default 2181)")
    parser.add_argument("--base-dir", metavar="DIR",
                        help="where data dirs and logs go (kept); default a temporary dir, "
                             "removed on exit")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config for every broker (as pybroker serve takes it)")


def run(args: argparse.Namespace) -> int:
    if args.brokers < 1:
        print("--brokers must be at least 1", file=sys.stderr)
        return 1
    java, classpath = find_zookeeper()
    if java is None:
        print(INSTALL_HINT, file=sys.stderr)
        return 1
    base = Path(args.base_dir) if args.base_dir else Path(tempfile.mkdtemp(prefix="pybroker-"))
    try:
        # a second local-cluster on the same --base-dir would rewrite zoo.cfg and run a
        # ZooKeeper on the live one's data: refused before anything is written
        base_lock = DirLock.acquire(base)
    except DirLocked as exc:
        print(str(exc), file=sys.stderr)
        return 1
    cluster = LocalCluster(base, args.brokers, args.port, args.zookeeper_port, java, classpath,
                           args.override)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT,
                                                                      signal.SIGTERM)}
    status = 0
    try:
        cluster.start(stop)
        if not stop.is_set():
            print(f"Bootstrap servers: {cluster.bootstrap}", flush=True)
            print("Press Ctrl-C to stop the cluster.", flush=True)
            while not stop.wait(POLL_S):
                dead = cluster.dead()
                if dead:
                    print(f"{dead} exited; stopping the cluster", file=sys.stderr)
                    status = 1
                    break
    except ToolError as exc:
        print(str(exc), file=sys.stderr)
        status = 1
    finally:
        cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        base_lock.release()
        if not args.base_dir:
            shutil.rmtree(base, ignore_errors=True)
    print("Stopped.", flush=True)
    return status


def find_zookeeper() -> tuple[str | None, str]:
    """(java binary, classpath) of an installed ZooKeeper, or (None, ...)."""
    classpath = os.environ.get("PYBROKER_ZOOKEEPER_CLASSPATH", ZOOKEEPER_CLASSPATH)
    java = os.environ.get("JAVA") or shutil.which("java")
    if not java or not Path(classpath.split(os.pathsep)[0]).exists():
        return None, classpath
    return java, classpath


class LocalCluster:
    def __init__(self, base: Path, brokers: int, port: int, zookeeper_port: int, java: str,
                 classpath: str, overrides: list[str]) -> None:
        self.base = base
        self.count = brokers
        self.port = port
        self.zookeeper_port = zookeeper_port
        self.java = java
        self.classpath = classpath
        self.overrides = overrides
        self.zookeeper: subprocess.Popen[bytes] | None = None
        self.brokers: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(self.count))

    def start(self, stop: threading.Event) -> None:
        self._start_zookeeper(stop)
        print(f"ZooKeeper on 127.0.0.1:{self.zookeeper_port} (data and log in "
              f"{self.base / 'zookeeper'})", flush=True)
        for broker_id in range(1, self.count + 1):
            self.brokers[broker_id] = self._spawn(self._broker_command(broker_id),
                                                  self.base / f"broker-{broker_id}.log")
            print(f"Broker {broker_id} on 127.0.0.1:{self.port + broker_id - 1} (data in "
                  f"{self.base / f'broker-{broker_id}'}, log {self.base}/broker-{broker_id}.log)",
                  flush=True)
        self._wait(stop, self._brokers_ready, "the brokers to know each other")

    def _start_zookeeper(self, stop: threading.Event) -> None:
        if _port_open(self.zookeeper_port):
            raise ToolError(f"port {self.zookeeper_port} is in use (another ZooKeeper?); "
                            "choose another with --zookeeper-port")
        home = self.base / "zookeeper"
        (home / "data").mkdir(parents=True, exist_ok=True)
        config = home / "zoo.cfg"
        config.write_text("\n".join([
            "tickTime=2000", f"dataDir={home / 'data'}", f"clientPort={self.zookeeper_port}",
            "clientPortAddress=127.0.0.1", "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr", "maxClientCnxns=0", ""]))
        self.zookeeper = self._spawn(
            [self.java, "-Xmx256m", "-Dzookeeper.jmx.log4j.disable=true", "-cp", self.classpath,
             ZOOKEEPER_MAIN, str(config)], home / "zookeeper.log")
        self._wait(stop, lambda: _ruok(self.zookeeper_port), "ZooKeeper to start")

    def _broker_command(self, broker_id: int) -> list[str]:
        settings = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port + broker_id - 1}",
            "log.dirs": str(self.base / f"broker-{broker_id}"),
            "zookeeper.connect": f"127.0.0.1:{self.zookeeper_port}{CHROOT}",
            # Kafka's 3 cannot be met by a smaller cluster (consumer groups would fail)
            "offsets.topic.replication.factor": str(min(3, self.count)),
        }
        command = [sys.executable, "-m", "pybroker", "serve"]
        for key, value in settings.items():
            command += ["--override", f"{key}={value}"]
        for item in self.overrides:
            command += ["--override", item]
        return command

    def _spawn(self, command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
        with open(log_path, "ab") as log:
            return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def _brokers_ready(self) -> bool:
        for broker_id in self.brokers:
            try:
                with WireClient(f"127.0.0.1:{self.port + broker_id - 1}", 2000) as client:
                    if len(client.brokers()) != self.count:
                        return False
            except (ToolError, OSError):
                return False
        return True

    def _wait(self, stop: threading.Event, ready: object, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not stop.is_set():
            dead = self.dead()
            if dead:
                raise ToolError(f"{dead} exited while waiting for {what}; see its log in "
                                f"{self.base}")
            if ready():  # type: ignore[operator]
                return
            if time.monotonic() > deadline:
                raise ToolError(f"timed out after {START_TIMEOUT_S:.0f}s waiting for {what}; "
                                f"see the logs in {self.base}")
            time.sleep(POLL_S)

    def dead(self) -> str | None:
        """The first child that has exited, named, or None."""
        if self.zookeeper is not None and self.zookeeper.poll() is not None:
            return f"ZooKeeper (status {self.zookeeper.returncode})"
        for broker_id, proc in self.brokers.items():
            if proc.poll() is not None:
                return f"broker {broker_id} (status {proc.returncode})"
        return None

    def stop(self) -> None:
        """SIGTERM the brokers (a clean shutdown each) and wait, then ZooKeeper."""
        for proc in self.brokers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.brokers.values():
            _reap(proc)
        if self.zookeeper is not None:
            if self.zookeeper.poll() is None:
                self.zookeeper.send_signal(signal.SIGTERM)
            _reap(self.zookeeper)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(STOP_TIMEOUT_S)


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False
