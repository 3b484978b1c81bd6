"""`pybroker local-cluster`: a ZooKeeper and N brokers on loopback, for trying cluster
mode on one machine -- and for breaking it on purpose, to watch failover.

    pybroker local-cluster --brokers 3 [--base-dir D] [--background]
    pybroker local-cluster --base-dir D status | kill N | stop N | start N | pause N |
                                         resume N | stop | purge

ZooKeeper is Debian's `zookeeper` package (its jar run with `java`, as the tests run
it; PYBROKER_ZOOKEEPER_CLASSPATH and JAVA point elsewhere); when it is not installed
the command says what to install and exits. Brokers 1..N listen on 127.0.0.1 from
--port on, each with its own data dir and log file under --base-dir (a new temporary dir
when not given). Once every broker knows all the others, the bootstrap string is
printed. The command then watches the cluster: a broker that dies is reported and the
cluster runs on without it. Ctrl-C (SIGINT) or SIGTERM stops the brokers (cleanly,
SIGTERM each) and then ZooKeeper; `--background` runs the same watcher detached (its
output in D/local-cluster.log) and returns once the cluster is up.

The other actions act on the cluster of --base-dir (its cluster.json): `kill N` is a
kill -9 of broker N, `stop N` a SIGTERM (a controlled shutdown) and a wait for its exit,
`start N` starts it again, `pause N` / `resume N` send SIGSTOP / SIGCONT (a broker that
hangs: its ZooKeeper session expires), `stop` stops everything, `purge` deletes the dir
once nothing runs. Data and logs stay until `purge`.

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
from pybroker.tools._local_state import STATE_FILE, ClusterState, Proc
from pybroker.tools._wire import WireClient

COMMAND = "local-cluster"
HELP = ("start ZooKeeper and N brokers on loopback (try cluster mode); status, kill N, "
        "stop N, start N, pause N, resume N, stop, purge act on a running one")

ZOOKEEPER_CLASSPATH = "/usr/share/java/zookeeper.jar"
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = ("ZooKeeper is not installed. On Debian or Ubuntu: apt-get install zookeeper "
                "(it brings Java); or set PYBROKER_ZOOKEEPER_CLASSPATH to ZooKeeper's jars "
                "and JAVA to a java binary.")
START_TIMEOUT_S = 60.0
#: a broker's stop: the last one up cannot hand its leaderships to anyone, so its controlled
#: shutdown runs all its retries (controlled.shutdown.max.retries, 5 s apart) first
STOP_TIMEOUT_S = 90.0
POLL_S = 0.2
#: the chroot the brokers share, so the ZooKeeper can hold other things too
CHROOT = "/pybroker"
#: the watcher's own output when it runs in the background
SUPERVISOR_LOG = "local-cluster.log"
#: actions on a running cluster, and whether they name a broker
ACTIONS = {"status": False, "kill": True, "stop": None, "start": True, "pause": True,
           "resume": True, "purge": False}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=sorted(ACTIONS),
                        help="act on the cluster of --base-dir instead of starting one")
    parser.add_argument("broker", nargs="?", type=int, help="the broker id (kill, stop, "
                        "start, pause, resume); stop without one stops the whole cluster")
    parser.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    parser.add_argument("--port", type=int, default=9092,
                        help="port of broker 1; broker i listens on port + i - 1 (default 9092)")
    parser.add_argument("--zookeeper-port", type=int, default=2181,
                        help="ZooKeeper's client port (default 2181)")
    parser.add_argument("--base-dir", metavar="DIR",
                        help="where data dirs, logs and cluster.json go (kept until purge); "
                             "default a new temporary dir")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config for every broker (as pybroker serve takes it)")
    parser.add_argument("--background", action="store_true",
                        help="start the cluster, leave it running, and return")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action is not None:
            return act(args)
        return start_cluster(args)
    except ToolError as exc:
        print(str(exc), file=sys.stderr)
        return 1


# --- starting and watching ----------------------------------------------------------------
def start_cluster(args: argparse.Namespace) -> int:
    if args.brokers < 1:
        raise ToolError("--brokers must be at least 1")
    if args.broker is not None:
        raise ToolError(f"unexpected argument {args.broker}")
    java, classpath = find_zookeeper()
    if java is None:
        raise ToolError(INSTALL_HINT)
    base = Path(args.base_dir) if args.base_dir else Path(tempfile.mkdtemp(prefix="pybroker-"))
    if args.background:
        return launch_background(args, base)
    try:
        # a second local-cluster on the same --base-dir would rewrite zoo.cfg and run a
        # ZooKeeper on the live one's data: refused before anything is written
        base_lock = DirLock.acquire(base)
    except DirLocked as exc:
        raise ToolError(f"{exc} (a local cluster runs there: pybroker local-cluster "
                        f"--base-dir {base} status)") from None
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
            print(f"Data and logs in {base} (kept until: pybroker local-cluster --base-dir "
                  f"{base} purge)", flush=True)
            print("Press Ctrl-C to stop the cluster.", flush=True)
            cluster.watch(stop)
    except ToolError as exc:
        print(str(exc), file=sys.stderr)
        status = 1
    finally:
        cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        base_lock.release()
    print("Stopped.", flush=True)
    return status


def launch_background(args: argparse.Namespace, base: Path) -> int:
    """The same command without --background, detached, its output in the base dir's
    local-cluster.log; return once it printed the bootstrap string (or failed)."""
    base.mkdir(parents=True, exist_ok=True)
    log_path = base / SUPERVISOR_LOG
    offset = log_path.stat().st_size if log_path.exists() else 0
    command = [sys.executable, "-m", "pybroker", "local-cluster", "--brokers",
               str(args.brokers), "--port", str(args.port), "--zookeeper-port",
               str(args.zookeeper_port), "--base-dir", str(base)]
    for item in args.override:
        command += ["--override", item]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + START_TIMEOUT_S + 30
    while True:
        text = log_path.read_text(errors="replace")[offset:]
        if "Bootstrap servers: " in text:
            print("\n".join(line for line in text.splitlines()
                            if not line.startswith("Press Ctrl-C")))
            print(f"Running in the background: pybroker local-cluster --base-dir {base} "
                  "status | kill N | stop N | start N | pause N | resume N | stop", flush=True)
            return 0
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            print(text, end="", file=sys.stderr)
            return 1
        time.sleep(POLL_S)


# --- acting on a running cluster ------------------------------------------------------------
def act(args: argparse.Namespace) -> int:
    if not args.base_dir:
        raise ToolError(f"{args.action} needs --base-dir: the directory of the cluster")
    base = Path(args.base_dir)
    state = ClusterState.load(base)
    if state is None:
        raise ToolError(f"no local cluster in {base} (no {STATE_FILE})")
    needs_broker = ACTIONS[args.action]
    if needs_broker and args.broker is None:
        raise ToolError(f"{args.action} needs a broker id, e.g. {args.action} 1")
    if needs_broker is False and args.broker is not None:
        raise ToolError(f"{args.action} takes no broker id")
    if args.broker is not None and args.broker not in state.brokers:
        raise ToolError(f"no broker {args.broker} in this cluster (brokers "
                        f"{', '.join(map(str, sorted(state.brokers)))})")
    if args.action == "status":
        print_status(state)
    elif args.action == "purge":
        purge(base, state)
    elif args.action == "stop" and args.broker is None:
        stop_all(base, state)
    else:
        act_on_broker(base, state, args.action, args.broker)
    return 0


def print_status(state: ClusterState) -> None:
    print(f"ZooKeeper  127.0.0.1:{state.zookeeper_port}  {_state_text(state.zookeeper)}")
    for broker_id, proc in sorted(state.brokers.items()):
        print(f"broker {broker_id}   127.0.0.1:{state.broker_port(broker_id)}  "
              f"{_state_text(proc)}")
    print(f"Bootstrap servers: {state.bootstrap()}")


def _state_text(proc: Proc) -> str:
    now = proc.state()
    return f"{now} (pid {proc.pid})" if now != "down" else "down"


def act_on_broker(base: Path, state: ClusterState, action: str, broker_id: int) -> None:
    proc = state.brokers[broker_id]
    now = proc.state()
    if action == "start":
        if now != "down":
            raise ToolError(f"broker {broker_id} is {now} (pid {proc.pid})")
        if state.zookeeper.state() == "down":
            raise ToolError("ZooKeeper is down: the cluster is stopped (start it again with "
                            f"pybroker local-cluster --base-dir {base} --brokers "
                            f"{len(state.brokers)})")
        proc.attach(_spawn(proc.command, Path(proc.log)).pid)
        state.save(base)
        print(f"broker {broker_id} started (pid {proc.pid}, log {proc.log})")
        return
    if now == "down":
        raise ToolError(f"broker {broker_id} is not running")
    if action == "kill":
        os.kill(proc.pid, signal.SIGKILL)
        print(f"broker {broker_id} killed (kill -9 {proc.pid})")
    elif action == "pause":
        os.kill(proc.pid, signal.SIGSTOP)
        print(f"broker {broker_id} paused (SIGSTOP {proc.pid}): it answers nothing until "
              "resume")
    elif action == "resume":
        os.kill(proc.pid, signal.SIGCONT)
        print(f"broker {broker_id} resumed (SIGCONT {proc.pid})")
    else:  # stop
        if now == "paused":
            os.kill(proc.pid, signal.SIGCONT)
        os.kill(proc.pid, signal.SIGTERM)
        if not _wait_down(proc, STOP_TIMEOUT_S + 30):
            raise ToolError(f"broker {broker_id} (pid {proc.pid}) did not exit in time")
        print(f"broker {broker_id} stopped (SIGTERM {proc.pid}: a controlled shutdown)")


def stop_all(base: Path, state: ClusterState) -> None:
    """SIGTERM to the command watching the cluster, which stops it in order; if it is
    gone, the brokers and ZooKeeper are stopped from here."""
    if state.supervisor.state() != "down":
        os.kill(state.supervisor.pid, signal.SIGTERM)
        if not _wait_down(state.supervisor, STOP_TIMEOUT_S * (len(state.brokers) + 2)):
            raise ToolError(f"the cluster's watcher (pid {state.supervisor.pid}) did not exit")
    for proc in [*state.brokers.values(), state.zookeeper]:
        if proc.state() == "paused":
            os.kill(proc.pid, signal.SIGCONT)
        if proc.state() != "down":
            os.kill(proc.pid, signal.SIGTERM)
            if not _wait_down(proc, STOP_TIMEOUT_S):
                os.kill(proc.pid, signal.SIGKILL)
    print(f"Stopped. Data and logs stay in {base} (pybroker local-cluster --base-dir {base} "
          "purge deletes them)")


def purge(base: Path, state: ClusterState) -> None:
    running = [name for name, proc in [("ZooKeeper", state.zookeeper),
                                       *((f"broker {i}", p) for i, p in state.brokers.items())]
               if proc.state() != "down"]
    if running:
        raise ToolError(f"{', '.join(running)} still running: pybroker local-cluster "
                        f"--base-dir {base} stop first")
    try:
        lock = DirLock.acquire(base)
    except DirLocked:
        raise ToolError(f"a local-cluster command still uses {base}") from None
    lock.release()
    shutil.rmtree(base)
    print(f"Deleted {base}")


def _wait_down(proc: Proc, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while proc.state() != "down":
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def _spawn(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def find_zookeeper() -> tuple[str | None, str]:
    """(java binary, classpath) of an installed ZooKeeper, or (None, ...)."""
    classpath = os.environ.get("PYBROKER_ZOOKEEPER_CLASSPATH", ZOOKEEPER_CLASSPATH)
    java = os.environ.get("JAVA") or shutil.which("java")
    if not java or not Path(classpath.split(os.pathsep)[0]).exists():
        return None, classpath
    return java, classpath


class LocalCluster:
    """The processes of one cluster, started by this command: their Popen handles (to
    reap them) and the ClusterState in the base dir (for the other commands)."""

    def __init__(self, base: Path, brokers: int, port: int, zookeeper_port: int, java: str,
                 classpath: str, overrides: list[str]) -> None:
        self.base = base
        self.count = brokers
        self.port = port
        self.zookeeper_port = zookeeper_port
        self.java = java
        self.classpath = classpath
        self.overrides = overrides
        self.children: list[subprocess.Popen[bytes]] = []
        self.state = ClusterState(port, zookeeper_port, Proc([], ""))
        self.state.supervisor.attach(os.getpid())

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(self.count))

    def start(self, stop: threading.Event) -> None:
        self._start_zookeeper(stop)
        print(f"ZooKeeper on 127.0.0.1:{self.zookeeper_port} (data and log in "
              f"{self.base / 'zookeeper'})", flush=True)
        for broker_id in range(1, self.count + 1):
            proc = Proc(self._broker_command(broker_id),
                        str(self.base / f"broker-{broker_id}.log"))
            self.state.brokers[broker_id] = proc
            self._start(proc)
            print(f"Broker {broker_id} on 127.0.0.1:{self.port + broker_id - 1} (data in "
                  f"{self.base / f'broker-{broker_id}'}, log {proc.log})", flush=True)
        self.state.save(self.base)
        self._wait(stop, self._brokers_ready, "the brokers to know each other")

    def _start(self, proc: Proc) -> None:
        child = _spawn(proc.command, Path(proc.log))
        self.children.append(child)
        proc.attach(child.pid)

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
        self.state.zookeeper = Proc(
            [self.java, "-Xmx256m", "-Dzookeeper.jmx.log4j.disable=true", "-cp", self.classpath,
             ZOOKEEPER_MAIN, str(config)], str(home / "zookeeper.log"))
        self._start(self.state.zookeeper)
        self.state.save(self.base)
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

    def _brokers_ready(self) -> bool:
        for broker_id in self.state.brokers:
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
            self._reap()
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

    def _reap(self) -> dict[int, int]:
        """Reap this command's children that exited: pid -> exit status."""
        ended = {}
        for child in list(self.children):
            if child.poll() is not None:
                ended[child.pid] = child.returncode
                self.children.remove(child)
        return ended

    def dead(self) -> str | None:
        """The first process of the cluster that is down, named, or None."""
        if self.state.zookeeper.pid and self.state.zookeeper.state() == "down":
            return "ZooKeeper"
        for broker_id, proc in self.state.brokers.items():
            if proc.state() == "down":
                return f"broker {broker_id}"
        return None

    def watch(self, stop: threading.Event) -> None:
        """Until `stop`: say when a process goes down or comes back (a kill N, a start N
        from another terminal, a crash); the cluster runs on without it."""
        was = {name: proc.state() for name, proc in self._procs()}
        while not stop.wait(POLL_S):
            statuses = self._reap()
            # a start N from another command changed the pids: read them back
            saved = ClusterState.load(self.base)
            if saved is not None:
                self.state.brokers = saved.brokers
            for name, proc in self._procs():
                now = proc.state()
                if now == was.get(name):
                    continue
                was[name] = now
                if now == "down":
                    status = statuses.get(proc.pid)
                    how = f" (status {status})" if status is not None else ""
                    start_hint = (f"; pybroker local-cluster --base-dir {self.base} start "
                                  f"{name.split()[-1]} starts it again"
                                  if name.startswith("broker") else "")
                    print(f"{name}{how} is down; the cluster runs on without it{start_hint}",
                          file=sys.stderr, flush=True)
                else:
                    print(f"{name} is {now} (pid {proc.pid})", file=sys.stderr, flush=True)

    def _procs(self) -> list[tuple[str, Proc]]:
        return [("ZooKeeper", self.state.zookeeper),
                *((f"broker {i}", p) for i, p in sorted(self.state.brokers.items()))]

    def stop(self) -> None:
        """SIGTERM the brokers one at a time, highest id first (a controlled shutdown each:
        its leaderships move to brokers still up, which they could not if all left at
        once), then ZooKeeper; a paused broker is resumed first."""
        saved = ClusterState.load(self.base)
        if saved is not None:
            self.state.brokers = saved.brokers
        for _, proc in sorted(self.state.brokers.items(), reverse=True):
            if proc.state() == "down":
                continue
            if proc.state() == "paused":
                os.kill(proc.pid, signal.SIGCONT)
            os.kill(proc.pid, signal.SIGTERM)
            self._wait_exit(proc)
        if self.state.zookeeper.state() != "down":
            os.kill(self.state.zookeeper.pid, signal.SIGTERM)
            self._wait_exit(self.state.zookeeper)
        self._reap()

    def _wait_exit(self, proc: Proc) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while proc.state() != "down":
            self._reap()
            if time.monotonic() > deadline:
                os.kill(proc.pid, signal.SIGKILL)
                deadline = time.monotonic() + STOP_TIMEOUT_S
            time.sleep(POLL_S)


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
