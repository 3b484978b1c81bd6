#!/usr/bin/env python3
"""Controller at scale (issue 25): how fast partitions get leaders, and what a full
Metadata request costs once they have.

For pybroker (``pybroker serve`` on a fresh data dir, single node, embedded metadata
store) and, with ``--peer HOST:PORT``, for an already running broker (stock Kafka):

1. **Create.** ``--partitions`` N partitions as N/100 topics of ``--per-topic`` (100)
   partitions, one CreateTopics at a time (confluent-kafka's AdminClient), each followed
   by Metadata requests for that topic until every partition has a leader; the next topic
   is created only then. Reported: the total, and the median / p90 time per topic over
   the first and the last 10 topics (a cost that grows with the partitions already there
   shows as last > first), and the CreateTopics answer time alone.
2. **Event loop.** Meanwhile a loop-lag probe (bench/latency.py: ApiVersions every 5 ms
   on a connection of its own) measures how long the broker's loop takes to get to a new
   request: its max is the longest stall while creating topics.
3. **Metadata.** A full Metadata request (v8, all topics) on a raw socket: median and
   p90 of ``--metadata-samples`` round trips (the response is read, not parsed).
4. **Restart** (pybroker only): SIGTERM, start on the same data dir, time from the new
   process's start until a full Metadata answer shows every partition with a leader.
5. **RSS** of the broker process after the creates (and after the restart); for the peer
   only with ``--peer-pid``. In cluster mode also each broker's open descriptors.

With ``--cluster`` (pybroker only): a 3-broker cluster on a ZooKeeper of its own
(Debian's package, as tests/cluster; Kafka's defaults for the session timeout and
replica.lag.time.max.ms), topics at ``--replication-factor`` (3 by default there), then
also:

6. **Controlled shutdown** of a broker that is not the controller (SIGTERM): time
   until no partition state in ZooKeeper names it as leader (polled), and the
   controller's own figure from its log (the ControlledShutdown request's work), and
   the CPU seconds of each broker and of ZooKeeper from the SIGTERM until every other
   broker's Metadata serves the new leaders.
7. **Controller failover**: kill -9 of the controller; time until another broker is
   controller (/controller), and until no partition is led by the killed one nor has
   it in its ISR (polled), plus the new controller's own figure from its log (the
   first full reconcile: every state read, every change written).
8. **RSS per partition replica**: each broker's RSS growth over the creates, divided
   by the replicas it hosts.
9. **Kill -9 of a leader** that is not the controller (after the restart of 6; not with
   ``--skip-restart``): time until no state names it, then its restart until it is back
   in every ISR. Both restarts (6's, after a clean stop, and this one) are timed from
   the new process's start: its first log line (imports), its listeners up (its log),
   ApiVersions answered, its "loaded N logs" lines, and every state with it back in the
   ISR (polled); ``--profile-restart DIR`` records each with py-spy.
10. **Event-loop stalls on every broker**, per phase (creating, controlled shutdown,
   restart, kill -9 of a leader and its restart, kill -9 of the controller): a loop-lag
   probe (bench/latency.py) on each live broker, p99 / max / probes over 50 ms, and the
   stalls each broker's own reporter logged (``event.loop.stall.report.ms=50``, on by
   default here) with the innermost pybroker frames sampled during each.

The cluster's brokers cache their compiled bytecode (``PYTHONPYCACHEPREFIX`` in the
bench's temp dir, ``PYTHONDONTWRITEBYTECODE`` unset), as an installed wheel has it: an
editable install run with ``PYTHONDONTWRITEBYTECODE=1`` (this machine's environment)
compiles every module at every start, 5-12 s of a restart on a loaded machine.

The topics are named ``ctlbench-<run>-<i>``, so a peer run does not collide with an
earlier one; they are deleted from the peer at the end unless ``--keep``.

Examples:
    python bench/controller.py --partitions 2000
    python bench/controller.py --partitions 5000 --peer 127.0.0.1:9092 --peer-pid 1234
    python bench/controller.py --partitions 5000 --json bench/results/controller.json
    python bench/controller.py --cluster --partitions 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from latency import LoopLagProbe, _recv_exact, percentile  # noqa: E402
from throughput import (  # noqa: E402
    LOOPBACK,
    _stop_process,
    free_port,
    machine_info,
    pybroker_command,
)

from pybroker.tools._load.workload import wait_all_led  # noqa: E402

try:
    import psutil
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install '.[bench]'")

#: how often a controlled shutdown's watcher asks each other broker for the metadata
#: of the topics it does not see moved yet
POLL_S = 0.02

#: Metadata v8 (the last non-flexible version), all topics: topics = null,
#: allow_auto_topic_creation, include_cluster/topic_authorized_operations all false
_METADATA_V8 = struct.pack(">hhih", 3, 8, 1, 3) + b"ctl" + struct.pack(">i???", -1, False,
                                                                      False, False)


def full_metadata_ms(address: tuple[str, int], samples: int) -> list[float]:
    """Round trips of a full Metadata request on one connection, in ms."""
    out: list[float] = []
    with socket.create_connection(address, timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frame = struct.pack(">i", len(_METADATA_V8)) + _METADATA_V8
        for _ in range(samples + 1):
            t0 = time.perf_counter()
            sock.sendall(frame)
            size = struct.unpack(">i", _recv_exact(sock, 4))[0]
            _recv_exact(sock, size)
            out.append((time.perf_counter() - t0) * 1000)
    return out[1:]  # the first pays for the connection's setup


def every_topic_led(bootstrap: str, topics: set[str], timeout: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    while True:
        try:
            md = admin.list_topics(timeout=max(1.0, deadline - time.monotonic()))
            if all(name in md.topics and md.topics[name].error is None
                   and md.topics[name].partitions
                   and all(p.leader >= 0 for p in md.topics[name].partitions.values())
                   for name in topics):
                return
        except Exception:  # not up yet
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"not every partition led {timeout} s after the restart")
        time.sleep(0.05)


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": round(statistics.median(ordered), 4) if ordered else float("nan"),
            "p90": round(percentile(ordered, 90), 4), "max": round(max(ordered, default=0), 4)}


def create_all(bootstrap: str, total: int, per_topic: int, replication: int,
               timeout: float) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    run = uuid.uuid4().hex[:6]
    names = [f"ctlbench-{run}-{i:04d}" for i in range(max(1, total // per_topic))]
    per: list[float] = []
    answers: list[float] = []
    probe = LoopLagProbe(bootstrap.split(",")[0])  # the first broker's loop
    probe.start()
    t_start = time.perf_counter()
    for name in names:
        t0 = time.perf_counter()
        futures = admin.create_topics([NewTopic(name, num_partitions=per_topic,
                                                replication_factor=replication)],
                                      operation_timeout=timeout, request_timeout=timeout)
        futures[name].result(timeout=timeout)
        answers.append(time.perf_counter() - t0)
        wait_all_led(admin, name, per_topic, timeout, poll_s=0.01)
        per.append(time.perf_counter() - t0)
        if len(per) % 10 == 0:
            print(f"  {len(per) * per_topic} partitions, last topic {per[-1]:.2f} s",
                  file=sys.stderr, flush=True)
    total_s = time.perf_counter() - t_start
    lag = sorted(probe.stop())
    return {
        "topics": names,
        "total_s": round(total_s, 2),
        "first10_s": summary(per[:10]),
        "last10_s": summary(per[-10:]),
        "create_answer_s": summary(answers),
        "loop_lag_ms": {"p99": round(percentile(lag, 99), 2), "max": round(max(lag, default=0), 2),
                        "samples": len(lag)},
    }


def open_fds(pid: int | None) -> int | None:
    """Open descriptors of a process (segment files, sockets, everything)."""
    if pid is None:
        return None
    try:
        return int(psutil.Process(pid).num_fds())
    except psutil.Error:
        return None


def rss_mib(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        return round(psutil.Process(pid).memory_info().rss / 2**20, 1)
    except psutil.Error:
        return None


def measure_side(label: str, bootstrap: str, pid: int | None, args: argparse.Namespace
                 ) -> dict[str, Any]:
    print(f"{label}: creating {args.partitions} partitions, {args.per_topic} a topic",
          file=sys.stderr, flush=True)
    result = create_all(bootstrap, args.partitions, args.per_topic, args.replication_factor,
                        args.timeout)
    # a peer cluster's bootstrap lists every node: ask the first
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    meta = full_metadata_ms((host, int(port)), args.metadata_samples)
    result["metadata_ms"] = summary(meta)
    result["rss_mib"] = rss_mib(pid)
    return result


def run_pybroker(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    bootstrap = f"{LOOPBACK}:{port}"
    with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        command = pybroker_command(args.pybroker_cmd) + [
            "serve", "--override", f"listeners=PLAINTEXT://{bootstrap}",
            "--override", f"log.dirs={tmp}/data", "--log-level", "WARN",
        ]

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                    stderr=open(f"{tmp}/broker.log", "ab"),
                                    start_new_session=True)

        proc = start()
        try:
            every_topic_led(bootstrap, set(), args.timeout)
            result = measure_side("pybroker", bootstrap, proc.pid, args)
            topics = set(result.pop("topics"))
            _stop_process(proc)
            t0 = time.perf_counter()
            proc = start()
            every_topic_led(bootstrap, topics, args.timeout)
            result["restart_s"] = round(time.perf_counter() - t0, 2)
            result["rss_after_restart_mib"] = rss_mib(proc.pid)
        except Exception:
            sys.stderr.write(Path(f"{tmp}/broker.log").read_text()[-3000:])
            raise
        finally:
            _stop_process(proc)
    return result


def run_peer(args: argparse.Namespace) -> dict[str, Any]:
    every_topic_led(args.peer, set(), args.timeout)
    result = measure_side("peer", args.peer, args.peer_pid, args)
    topics = result.pop("topics")
    if not args.keep:
        admin = AdminClient({"bootstrap.servers": args.peer, "log_level": 0})
        for future in admin.delete_topics(topics, operation_timeout=args.timeout).values():
            try:
                future.result(timeout=args.timeout)
            except Exception as exc:
                print(f"peer: deleting a bench topic: {exc}", file=sys.stderr)
    result["restart_s"] = None  # a peer is not ours to restart
    return result


# --- cluster mode ----------------------------------------------------------------------

def read_states(connect: str, topics: list[str], per_topic: int
                ) -> dict[tuple[str, int], dict[str, Any]]:
    """Every partition state of the topics, read in ZooKeeper multiReads (a kazoo
    session of its own): (topic, partition) -> the state znode's JSON."""
    from pybroker.coordination.zkclient import AsyncKazoo
    from pybroker.coordination.zkmultiread import get_many

    async def read() -> dict[tuple[str, int], dict[str, Any]]:
        zk = AsyncKazoo(connect, session_timeout_s=30, request_timeout_s=60)
        await zk.start(30)
        try:
            keys = [(t, p) for t in topics for p in range(per_topic)]
            reads = await get_many(zk, [f"/brokers/topics/{t}/partitions/{p}/state"
                                        for t, p in keys])
        finally:
            await zk.stop()
        return {k: json.loads(r[0]) for k, r in zip(keys, reads, strict=True) if r}

    return asyncio.run(read())


def served_elsewhere(bootstraps: dict[int, str], target: int, topics: list[str],
                     timeout: float) -> dict[int, float | None]:
    """Poll every other broker's Metadata until it shows every partition led by a broker
    other than `target` (a broker's cache gives the leader of a partition it is to lead
    only once its replica layer took the leadership on); broker -> the time.time() it
    did. Every topic not seen done yet in one request, as a client refreshes the
    metadata of its topics, every POLL_S (one topic a request, 100 topics one after
    another, took seconds a round on a busy broker: the figure was the poll's)."""
    from pybroker.client.connection import BrokerConnection

    async def watch(bootstrap: str) -> float | None:
        host, port = bootstrap.rsplit(":", 1)
        connection = BrokerConnection(host, int(port), "bench-controller", 30.0)
        pending = set(topics)
        deadline = time.monotonic() + timeout
        try:
            while pending and time.monotonic() < deadline:
                try:
                    body = await connection.request(3, 8, {
                        "topics": [{"name": t} for t in sorted(pending)],
                        "allow_auto_topic_creation": False,
                        "include_cluster_authorized_operations": False,
                        "include_topic_authorized_operations": False})
                except Exception:  # noqa: BLE001 - a slow answer: asked again
                    await asyncio.sleep(0.1)
                    continue
                for t in body["topics"]:
                    leaders = [p["leader_id"] for p in t["partitions"]]
                    if leaders and all(leader not in (-1, target) for leader in leaders):
                        pending.discard(t["name"])
                await asyncio.sleep(POLL_S)
        finally:
            await connection.close()
        return None if pending else time.time()

    async def every() -> dict[int, float | None]:
        others = sorted(b for b in bootstraps if b != target)
        done = await asyncio.gather(*(watch(bootstraps[b]) for b in others))
        return dict(zip(others, done, strict=True))

    return asyncio.run(every())


def _serve_watch(queue: Any, *args: Any) -> None:
    queue.put(served_elsewhere(*args))


def start_served_watch(cluster: Any, target: int, topics: list[str], timeout: float
                       ) -> tuple[Any, Any]:
    """served_elsewhere in a process of its own: in this one it shared the GIL with the
    poll of every state (a kazoo session decoding thousands of states every 50 ms), so
    its answers waited on this script, not on the brokers. (process, queue)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    bootstraps = {b: broker.bootstrap for b, broker in cluster.brokers.items()}
    process = context.Process(target=_serve_watch,
                              args=(queue, bootstraps, target, topics, timeout), daemon=True)
    process.start()
    return process, queue


def process_cpu_s(pid: int) -> float:
    """CPU seconds process `pid` has used so far, all its threads (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def poll_until(check: Any, timeout: float, what: str) -> float:
    """Poll `check()` until true; the time.time() it was first seen true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.time()
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


_LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")


def log_lines_since(path: Path, since: float, pattern: str) -> list[tuple[float, str]]:
    """Lines of a broker log matching `pattern` logged at or after `since`
    (time.time()), with their timestamps."""
    out = []
    regex = re.compile(pattern)
    for line in path.read_text(errors="replace").splitlines():
        stamp = _LOG_TIME.match(line)
        if not stamp or not regex.search(line):
            continue
        when = time.mktime(time.strptime(stamp[1], "%Y-%m-%d %H:%M:%S")) + int(stamp[2]) / 1000
        if when >= since - 0.001:
            out.append((when, line))
    return out


#: the issue's goal: no event-loop stall longer than this on any broker
STALL_MS = 50.0
_STALL_LINE = re.compile(r"event loop stalled for (\d+) ms")
_STALL_GC = re.compile(r"of which (\d+) ms in the cyclic GC \((\d+) full collections"
                       r"(?:, (\d+) ms)?")
_FRAME_LINE = re.compile(r"^\s+(pybroker/\S+ in \S+)")


class LoopWatch:
    """A loop-lag probe on every live broker of a cluster, through named phases; what
    each probe saw and what each broker's stall reporter logged, cut by phase."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.probes: list[tuple[int, LoopLagProbe]] = []
        self.phases: list[tuple[str, float, float]] = []
        self._current: tuple[str, float] | None = None

    def probe(self, broker_id: int) -> None:
        """Probe a broker (again, after its restart) until it goes away."""
        probe = LoopLagProbe(self.cluster.brokers[broker_id].bootstrap)
        probe.until_gone = True
        probe.start()
        self.probes.append((broker_id, probe))

    def phase(self, name: str | None) -> None:
        """End the current phase; begin `name` (None: none, nothing counted)."""
        now = time.time()
        if self._current is not None:
            self.phases.append((self._current[0], self._current[1], now))
        self._current = (name, now) if name else None

    def stop(self) -> dict[str, dict[int, dict[str, Any]]]:
        self.phase(None)
        for _, probe in self.probes:
            probe.stop()
        stalls = {b: broker_stalls(broker.log_path)
                  for b, broker in self.cluster.brokers.items()}
        out: dict[str, dict[int, dict[str, Any]]] = {}
        for name, t0, t1 in self.phases:
            per: dict[int, list[float]] = {b: [] for b in self.cluster.brokers}
            for b, probe in self.probes:
                per[b] += [rtt for rtt, sent in zip(probe.rtts_ms, probe.sent_at, strict=False)
                           if t0 <= sent < t1]
            out[name] = {}
            for b, lag in per.items():
                lag.sort()
                logged = [(ms, where) for when, ms, where, _ in stalls[b] if t0 <= when < t1]
                gc_ms = [gc for when, _, _, gc in stalls[b] if t0 <= when < t1]
                wheres: dict[str, int] = {}
                for _, where in logged:
                    wheres[where] = wheres.get(where, 0) + 1
                out[name][b] = {
                    "probes": len(lag), "p99_ms": round(percentile(lag, 99), 1) if lag else None,
                    "max_ms": round(max(lag), 1) if lag else None,
                    "over_50ms": sum(x > STALL_MS for x in lag),
                    "logged_stalls_ms": sorted((ms for ms, _ in logged), reverse=True),
                    "logged_where": sorted(wheres.items(), key=lambda x: -x[1]),
                    # the cyclic GC's share of the logged stalls (ms, full collections)
                    "logged_gc_ms": sum(ms for ms, _, _ in gc_ms),
                    "logged_full_gcs": sum(n for _, n, _ in gc_ms),
                    "logged_full_gc_ms": sum(ms for _, _, ms in gc_ms),
                }
        return out


def broker_stalls(path: Path) -> list[tuple[float, int, str, tuple[int, int, int]]]:
    """(time, ms, where, (GC ms, full GCs, their ms)) of every stall a broker logged:
    `where` is the innermost pybroker frames of the most seen sample (or the innermost
    frame when it was outside the package); the GC part is the collector's time during
    the stall (zeros from a broker that does not log it)."""
    out: list[tuple[float, int, str, tuple[int, int, int]]] = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for i, line in enumerate(lines):
        found = _STALL_LINE.search(line)
        stamp = _LOG_TIME.match(line)
        if not found or not stamp:
            continue
        when = time.mktime(time.strptime(stamp[1], "%Y-%m-%d %H:%M:%S")) + int(stamp[2]) / 1000
        frames: list[str] = []
        last = ""
        for follow in lines[i + 1:]:
            if _LOG_TIME.match(follow) or (frames and "seen" in follow):
                break  # the next log line, or the next (less seen) sample
            if "seen" in follow or not follow.startswith("    "):
                continue
            last = follow.strip()
            framed = _FRAME_LINE.match(follow)
            if framed:
                frames.append(framed[1])
        if "selectors.py" in last:
            where = "idle in the selector (the process not scheduled, or the GIL elsewhere)"
        else:
            where = " < ".join(reversed(frames[-3:])) if frames else (last or "no sample")
        gc_part = _STALL_GC.search(line)
        out.append((when, int(found[1]), where,
                    (int(gc_part[1]), int(gc_part[2]), int(gc_part[3] or 0)) if gc_part
                    else (0, 0, 0)))
    return out


def report_stalls(loops: dict[str, dict[int, dict[str, Any]]]) -> None:
    print("  event loop, every broker (probe p99 / max ms, probes over 50 ms; stalls the "
          "broker logged):")
    for name, per in loops.items():
        print(f"    {name}:")
        for b, r in sorted(per.items()):
            if not r["probes"] and not r["logged_stalls_ms"]:
                print(f"      broker {b}: down")
                continue
            print(f"      broker {b}: {r['p99_ms']} / {r['max_ms']} ms, {r['over_50ms']} of "
                  f"{r['probes']} over 50 ms; logged {r['logged_stalls_ms'][:8]} "
                  f"(sum {sum(r['logged_stalls_ms'])} ms, of which {r['logged_gc_ms']} ms "
                  f"in the GC, {r['logged_full_gc_ms']} ms in {r['logged_full_gcs']} full "
                  f"ones)")
            for where, n in r["logged_where"][:4]:
                print(f"        {n}x {where}")


def run_cluster(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    from tests.cluster.cluster import Cluster
    from tests.cluster.zookeeper import ZooKeeperServer, unavailable_reason
    from tests.conftest import Broker

    # a restart recovering thousands of logs on a loaded machine takes longer than the
    # tests' 30 s: the bench waits as long as for everything else
    Broker.wait_ready.__defaults__ = (args.timeout,)

    reason = unavailable_reason()
    if reason:
        sys.exit(f"cannot run ZooKeeper: {reason}")
    overrides = {"zookeeper.session.timeout.ms": 18000, "replica.lag.time.max.ms": 30000,
                 "event.loop.stall.report.ms": int(STALL_MS)}
    overrides.update(dict(kv.split("=", 1) for kv in args.override))
    with tempfile.TemporaryDirectory(prefix="bench-controller-cluster-") as tmp:
        # the brokers inherit this environment (see the docstring)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        zookeeper = ZooKeeperServer(Path(tmp) / "zk").start()
        cluster = Cluster(zookeeper, Path(tmp) / "brokers", overrides=overrides)
        try:
            cluster.start(ready_timeout_s=args.timeout)  # a loaded machine's imports are slow
            return measure_cluster(cluster, args)
        except Exception:
            for broker_id, broker in cluster.brokers.items():
                sys.stderr.write(f"--- broker {broker_id}\n{broker.log_tail()[-3000:]}\n")
            raise
        finally:
            cluster.close()
            zookeeper.stop()
            if args.keep_logs:
                Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
                for broker_id, broker in cluster.brokers.items():
                    shutil.copy(broker.log_path, Path(args.keep_logs) / f"broker{broker_id}.log")


def measure_restart(cluster: Any, target: int, kind: str, states: Any,
                    args: argparse.Namespace, on_serving: Any = None) -> dict[str, Any]:
    """Start broker `target` again (stopped cleanly, or killed: `kind`) on its data dir,
    and time, from the new process's start: its first log line (the imports), the
    listeners up (its log), ApiVersions answered, the logs it opened (its "loaded N
    logs" lines), and every partition state with it back in the ISR (polled)."""
    broker = cluster.brokers[target]
    print(f"cluster: restart of broker {target} after a {kind} stop", file=sys.stderr,
          flush=True)
    old_pid = broker.proc.pid if broker.proc is not None else None
    profiler: list[subprocess.Popen[bytes]] = []
    if args.profile_restart:
        out = Path(args.profile_restart) / f"restart-{kind}-{int(time.time())}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)

        def attach() -> None:  # py-spy on the new process as soon as it exists
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                proc = broker.proc
                if proc is not None and proc.pid != old_pid:
                    profiler.append(subprocess.Popen(
                        ["py-spy", "record", "--pid", str(proc.pid), "--idle", "--threads",
                         "--format", "raw", "--rate", "50", "-o", str(out)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                    return
                time.sleep(0.005)

        threading.Thread(target=attach, daemon=True).start()
        # the other brokers too: the leaders' side of the rejoin (the follower fetches
        # they answer, their ISR expansion passes and writes)
        profiler += profile_brokers(cluster, args.profile_restart, f"restart-{kind}-leaders")
    t_start = time.time()
    broker.start(ready_timeout=args.timeout * 3)
    t_serving = time.time()
    if on_serving is not None:
        on_serving()
    try:
        t_isr: float | None = poll_until(
            lambda: all(len(s["isr"]) == args.replication_factor for s in states().values()),
            args.timeout * 3, f"broker {target} back in every ISR")
    except RuntimeError as exc:
        print(f"cluster: {exc}; going on", file=sys.stderr, flush=True)
        t_isr = None
    # the "loaded" lines are logged once a burst has been quiet for a moment
    time.sleep(1.0)
    for spy in profiler:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
    lines = log_lines_since(broker.log_path, t_start, r".")
    listening = [when for when, line in lines if "listening on" in line]
    started = [line.split("] ", 1)[-1] for _, line in lines if "INFO started in" in line]
    loaded = [(when, line) for when, line in lines if re.search(r"loaded \d+ logs", line)]

    def since(when: float | None) -> float | None:
        return round(when - t_start, 2) if when is not None else None

    return {
        "broker": target, "kind": kind,
        "first_log_line_s": since(lines[0][0] if lines else None),
        "listening_s": since(listening[0] if listening else None),
        "serving_s": round(t_serving - t_start, 2),
        "logs_loaded": [f"+{since(when)} s: {line.split('] ', 1)[-1][:150]}"
                        for when, line in loaded],
        "phases": started[0][:300] if started else None,
        "in_every_isr_s": since(t_isr),
    }


def measure_cluster(cluster: Any, args: argparse.Namespace) -> dict[str, Any]:
    connect = cluster.zookeeper.address + cluster.chroot
    pids = {b: broker.proc.pid for b, broker in cluster.brokers.items()}
    rss_before = {b: rss_mib(pid) for b, pid in pids.items()}
    print(f"cluster: creating {args.partitions} partitions, {args.per_topic} a topic, "
          f"RF {args.replication_factor}", file=sys.stderr, flush=True)
    watch = LoopWatch(cluster)
    for broker_id in cluster.brokers:
        watch.probe(broker_id)
    watch.phase("creating")
    result = create_all(cluster.bootstrap, args.partitions, args.per_topic,
                        args.replication_factor, args.timeout)
    watch.phase(None)
    topics = result.pop("topics")
    replicas_per_broker = len(topics) * args.per_topic * args.replication_factor / len(pids)
    rss_after = {b: rss_mib(pid) for b, pid in pids.items()}
    result["rss_mib"] = rss_after
    result["open_fds"] = {b: open_fds(pid) for b, pid in pids.items()}
    result["rss_kib_per_replica"] = {
        b: round((rss_after[b] - rss_before[b]) * 1024 / replicas_per_broker, 1)
        for b in pids if rss_after[b] is not None and rss_before[b] is not None}

    host, port = cluster.brokers[min(cluster.brokers)].bootstrap.rsplit(":", 1)
    result["metadata_ms"] = summary(full_metadata_ms((host, int(port)), args.metadata_samples))

    def states() -> dict[tuple[str, int], dict[str, Any]]:
        return read_states(connect, topics, args.per_topic)

    t0 = time.perf_counter()
    states()
    result["read_all_states_s"] = round(time.perf_counter() - t0, 2)

    # controlled shutdown of a broker that is not the controller
    controller = cluster.controller()
    target = next(b for b in sorted(cluster.brokers) if b != controller)
    led = sum(s["leader"] == target for s in states().values())
    print(f"cluster: controlled shutdown of broker {target} ({led} leaderships)",
          file=sys.stderr, flush=True)
    proc = cluster.brokers[target].proc
    spies = profile_brokers(cluster, args.profile_shutdown, "shutdown")
    watch.phase("controlled shutdown")
    cpu_pids = {f"broker{b}": broker.proc.pid for b, broker in cluster.brokers.items()}
    if cluster.zookeeper.proc is not None:
        cpu_pids["zookeeper"] = cluster.zookeeper.proc.pid
    cpu_start = {name: process_cpu_s(pid) for name, pid in cpu_pids.items()}
    t_term = time.time()
    proc.send_signal(signal.SIGTERM)
    served: dict[int, float | None] = {}
    server, answers = start_served_watch(cluster, target, topics, args.timeout)
    try:
        t_moved: float | None = poll_until(
            lambda: all(s["leader"] != target for s in states().values()), args.timeout,
            f"broker {target}'s leaderships to move")
    except RuntimeError as exc:
        print(f"cluster: {exc}; going on", file=sys.stderr, flush=True)
        t_moved = None
    try:
        served.update(answers.get(timeout=args.timeout))
    except Exception as exc:  # noqa: BLE001 - reported as not served
        print(f"cluster: the Metadata watch gave no answer: {exc!r}", file=sys.stderr)
    server.join(10)
    # CPU seconds each process spent from the SIGTERM until every other broker served
    # the new leaders (less sensitive to a loaded machine than the wall clock)
    cpu_spent = {name: round(process_cpu_s(pid) - cpu_start[name], 2)
                 for name, pid in cpu_pids.items()}
    for spy in spies:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
    proc.wait(timeout=args.timeout * 3)
    t_exit = time.time()
    unclean = log_lines_since(cluster.brokers[target].log_path, t_term,
                              r"controlled shutdown attempt \d+ failed|proceeding to do an "
                              r"unclean shutdown")
    own = log_lines_since(cluster.brokers[controller].log_path, t_term,
                          rf"controlled shutdown of broker {target},.* in ([\d.]+) s")
    applied = {b: [(round(when - t_term, 2), line.split("] ", 1)[-1][:120]) for when, line in
                   log_lines_since(cluster.brokers[b].log_path, t_term,
                                   r"applied the partition states of .* became leader of "
                                   r"[1-9]")]
               for b in cluster.brokers if b != target}
    # when the request reached the controller: its line's time less the work it names
    reached = [round(when - float(re.search(r"in ([\d.]+) s", line)[1]) - t_term, 2)
               for when, line in own]
    # each broker's metadata listener: the controller's batches read and applied
    listened = {b: [(round(when - t_term, 2), line.split("] ", 1)[-1][:140]) for when, line in
                    log_lines_since(cluster.brokers[b].log_path, t_term,
                                    r"re-read \d+ changed partition state|metadata: applied "
                                    r"\d+ partition state change")]
                for b in cluster.brokers if b != target}
    exit_lines = log_lines_since(cluster.brokers[target].log_path, t_term,
                                 r"controlled shutdown succeeded|shut down cleanly")
    result["controlled_shutdown"] = {
        "broker": target, "leaderships": led,
        "request_reached_controller_s": reached,
        "listeners": listened,
        "leaving_broker": [(round(when - t_term, 2), line.split("] ", 1)[-1][:80])
                           for when, line in exit_lines],
        "moved_s": round(t_moved - t_term, 2) if t_moved else None,
        "takeovers_applied": applied,
        "served_by_new_leaders_s": {b: round(t - t_term, 2) if t else None
                                    for b, t in sorted(served.items())},
        "exited_s": round(t_exit - t_term, 2),
        "failed_attempts_and_unclean": [line[-160:] for _, line in unclean],
        "controller_s": [float(re.search(r"in ([\d.]+) s", line)[1]) for _, line in own],
        "controller_line": [line.split("] ", 1)[-1][:300] for _, line in own],
        "cpu_s_until_served": cpu_spent,
    }
    cluster.brokers[target].stop()
    watch.phase(None)
    result["restart"] = None
    result["leader_kill"] = None
    if not args.skip_restart:
        watch.phase("restart")
        result["restart"] = restart_or_none(cluster, target, "clean", states, args,
                                            lambda: watch.probe(target))
        watch.phase(None)
        result["leader_kill"] = kill_a_leader(cluster, watch, states, args)

    result["controller_failover"] = None
    if args.skip_controller_kill:
        result["event_loop"] = watch.stop()
        result["event_loop_phases"] = watch.phases
        return result
    # kill -9 of the controller
    controller = cluster.controller()
    led = sum(s["leader"] == controller for s in states().values())
    print(f"cluster: kill -9 of controller {controller} ({led} leaderships)",
          file=sys.stderr, flush=True)
    watch.phase("kill -9 of the controller")
    t_kill = time.time()
    cluster.kill(controller)
    t_new = poll_until(lambda: cluster.controller() not in (None, controller), args.timeout,
                       "another controller")
    new = cluster.controller()
    t_done = poll_until(lambda: all(s["leader"] != controller and controller not in s["isr"]
                                    for s in states().values()),
                        args.timeout, f"the killed controller {controller} out of every state")
    watch.phase(None)
    elected = log_lines_since(cluster.brokers[new].log_path, t_kill,
                              r"is the controller \(epoch")
    first_full = None
    deadline = time.monotonic() + 10  # the line follows the states' per-partition lines
    while first_full is None and time.monotonic() < deadline:
        loads = log_lines_since(cluster.brokers[new].log_path, t_kill,
                                r"controller: reconciled (\d+) topic\(s\), (\d+) partition")
        first_full = next((line for _, line in loads
                           if int(re.search(r"(\d+) partition", line)[1])
                           >= len(topics) * args.per_topic), None)
        time.sleep(0.2)
    result["controller_failover"] = {
        "killed": controller, "new": new, "leaderships": led,
        "new_controller_s": round(t_new - t_kill, 2),
        "elections_done_s": round(t_done - t_kill, 2),
        "elected_at_s": round(elected[0][0] - t_kill, 2) if elected else None,
        "first_full_reconcile_s": (float(re.search(r"in ([\d.]+) s", first_full)[1])
                                   if first_full else None),
    }
    result["event_loop"] = watch.stop()
    # (name, start, end) in epoch seconds, for bench/stall_rank.py over the kept logs
    result["event_loop_phases"] = watch.phases
    return result


def profile_brokers(cluster: Any, directory: str | None, phase: str
                    ) -> list[subprocess.Popen[bytes]]:
    """py-spy record (raw stacks of every thread, idle included) of every live broker
    into DIRECTORY, until SIGINT; none without a directory."""
    if not directory:
        return []
    Path(directory).mkdir(parents=True, exist_ok=True)
    spies = []
    for broker_id, broker in sorted(cluster.brokers.items()):
        if broker.proc is None or broker.proc.poll() is not None:
            continue
        out = Path(directory) / f"{phase}-broker{broker_id}-{int(time.time())}.txt"
        spies.append(subprocess.Popen(
            ["py-spy", "record", "--pid", str(broker.proc.pid), "--idle", "--threads",
             "--format", "raw", "--rate", "100", "-o", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(1.0)  # attached before the phase starts
    return spies


def kill_a_leader(cluster: Any, watch: LoopWatch, states: Any, args: argparse.Namespace
                  ) -> dict[str, Any]:
    """kill -9 of the broker that is not the controller and leads the most partitions:
    time until no state names it as leader nor in its ISR, then its restart until it is
    back in every ISR."""
    controller = cluster.controller()
    counts: dict[int, int] = {}
    for s in states().values():
        counts[s["leader"]] = counts.get(s["leader"], 0) + 1
    target = max((b for b in cluster.brokers if b != controller),
                 key=lambda b: counts.get(b, 0))
    print(f"cluster: kill -9 of leader {target} ({counts.get(target, 0)} leaderships)",
          file=sys.stderr, flush=True)
    watch.phase("kill -9 of a leader")
    t_kill = time.time()
    cluster.kill(target)
    try:
        t_done: float | None = poll_until(
            lambda: all(s["leader"] != target and target not in s["isr"]
                        for s in states().values()),
            args.timeout, f"the killed broker {target} out of every state")
    except RuntimeError as exc:
        print(f"cluster: {exc}; going on", file=sys.stderr, flush=True)
        t_done = None
    watch.phase("restart after the kill -9")
    restart = restart_or_none(cluster, target, "kill", states, args,
                              lambda: watch.probe(target))
    watch.phase(None)
    return {"broker": target, "leaderships": counts.get(target, 0),
            "out_of_every_state_s": round(t_done - t_kill, 2) if t_done else None,
            "back_in_every_isr_s": restart["in_every_isr_s"] if restart else None,
            "restart": restart}


def restart_or_none(cluster: Any, target: int, kind: str, states: Any,
                    args: argparse.Namespace, on_serving: Any = None) -> dict[str, Any] | None:
    """measure_restart; None (reported) when the broker did not serve in time, so the
    run goes on with the others and keeps what it measured."""
    try:
        return measure_restart(cluster, target, kind, states, args, on_serving)
    except RuntimeError as exc:  # not ready in time: the harness killed it
        print(f"cluster: broker {target} did not serve after its restart; going on "
              f"without it ({str(exc)[:200]})", file=sys.stderr, flush=True)
        return None


def report_restart(b: dict[str, Any]) -> None:
    print(f"  restart of broker {b['broker']} after a {b['kind']} stop: first log line "
          f"{b['first_log_line_s']} s, listening {b['listening_s']} s, serving "
          f"{b['serving_s']:.2f} s, in every ISR {b['in_every_isr_s']} s")
    for line in b["logs_loaded"]:
        print(f"    {line}")
    if b.get("phases"):
        print(f"    {b['phases']}")


def report_cluster(r: dict[str, Any]) -> None:
    report("pybroker cluster", r)
    print(f"  RSS per partition replica: {r['rss_kib_per_replica']} KiB "
          f"(RSS {r['rss_mib']} MiB)")
    print(f"  open descriptors per broker after the creates: {r['open_fds']}")
    print(f"  reading every partition state (multiRead, this script): "
          f"{r['read_all_states_s']:.2f} s")
    c = r["controlled_shutdown"]
    print(f"  controlled shutdown of broker {c['broker']} ({c['leaderships']} leaderships): "
          f"moved in {c['moved_s']} s (polled), controller's work {c['controller_s']} s, "
          f"every other broker's Metadata shows every new leader after "
          f"{c.get('served_by_new_leaders_s')} s (polled), "
          f"process exited after {c['exited_s']:.2f} s; CPU seconds until then served: "
          f"{c.get('cpu_s_until_served')}")
    print(f"    the request reached the controller after {c.get('request_reached_controller_s')}"
          f" s; the leaving broker: {c.get('leaving_broker')}")
    for line in c["failed_attempts_and_unclean"]:
        print(f"    {line}")
    for b, lines in sorted(c.get("takeovers_applied", {}).items()):
        for since, line in lines[:6]:
            print(f"    broker {b} +{since} s: {line}")
    for b, lines in sorted(c.get("listeners", {}).items()):
        for since, line in lines[:12]:
            print(f"    broker {b} +{since} s: {line}")
    if r["restart"] is not None:
        report_restart(r["restart"])
    k = r.get("leader_kill")
    if k is not None:
        print(f"  kill -9 of leader {k['broker']} ({k['leaderships']} leaderships): out of "
              f"every state after {k['out_of_every_state_s']} s (polled); restarted, back in "
              f"every ISR after {k['back_in_every_isr_s']} s")
        if k["restart"] is not None:
            report_restart(k["restart"])
    f = r["controller_failover"]
    if f is not None:
        print(f"  kill -9 of controller {f['killed']} ({f['leaderships']} leaderships): "
              f"broker {f['new']} controller after {f['new_controller_s']:.2f} s (its log: "
              f"elected {f['elected_at_s']} s), first full reconcile "
              f"{f['first_full_reconcile_s']} s, every state without {f['killed']} after "
              f"{f['elections_done_s']:.2f} s (polled)")
    report_stalls(r["event_loop"])


def report(label: str, r: dict[str, Any]) -> None:
    def s(x: dict[str, float]) -> str:
        return f"median {x['median']:.2f} s, p90 {x['p90']:.2f} s"
    print(f"{label}:")
    print(f"  created and led in {r['total_s']:.1f} s; per topic: first 10 {s(r['first10_s'])}; "
          f"last 10 {s(r['last10_s'])}")
    print(f"  CreateTopics answer: median {r['create_answer_s']['median'] * 1000:.0f} ms, "
          f"max {r['create_answer_s']['max'] * 1000:.0f} ms")
    print(f"  loop-lag probe while creating: p99 {r['loop_lag_ms']['p99']:.1f} ms, "
          f"max {r['loop_lag_ms']['max']:.1f} ms")
    print(f"  full Metadata request: median {r['metadata_ms']['median']:.1f} ms, "
          f"p90 {r['metadata_ms']['p90']:.1f} ms")
    if r.get("restart_s") is not None:
        print(f"  restart until every partition led: {r['restart_s']:.2f} s")
    print(f"  RSS: {r['rss_mib']} MiB"
          + (f" (after the restart {r['rss_after_restart_mib']} MiB)"
             if r.get("rss_after_restart_mib") else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--replication-factor", type=int,
                        help="default 1, and 3 with --cluster")
    parser.add_argument("--cluster", action="store_true",
                        help="a 3-broker ZooKeeper cluster (see the docstring)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="--cluster: extra broker setting (repeatable)")
    parser.add_argument("--skip-restart", action="store_true",
                        help="--cluster: leave the shut-down broker down (the kill -9 then "
                             "leaves one broker)")
    parser.add_argument("--keep-logs", metavar="DIR", help="--cluster: copy the broker logs here")
    parser.add_argument("--metadata-samples", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--peer", help="HOST:PORT of a running broker to compare with")
    parser.add_argument("--peer-pid", type=int, help="the peer's pid, for its RSS")
    parser.add_argument("--keep", action="store_true", help="leave the peer's topics")
    parser.add_argument("--skip-controller-kill", action="store_true",
                        help="--cluster: no kill -9 of the controller at the end")
    parser.add_argument("--profile-restart", metavar="DIR",
                        help="--cluster: py-spy record (raw stacks, idle included) of each "
                             "restarted broker until it is in every ISR, and of the other "
                             "live brokers over the same time, into DIR")
    parser.add_argument("--profile-shutdown", metavar="DIR",
                        help="--cluster: py-spy record (raw stacks, idle included) of every "
                             "broker through the controlled shutdown, into DIR")
    parser.add_argument("--skip-pybroker", action="store_true")
    parser.add_argument("--pybroker-cmd", help="command that starts pybroker, before 'serve'")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    out: dict[str, Any] = {"command": " ".join(sys.argv), "machine": machine_info(),
                           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if args.replication_factor is None:
        args.replication_factor = 3 if args.cluster else 1
    if args.cluster:
        out["cluster"] = run_cluster(args)
        report_cluster(out["cluster"])
    elif not args.skip_pybroker:
        out["pybroker"] = run_pybroker(args)
        report("pybroker", out["pybroker"])
    if args.peer:
        out["peer"] = run_peer(args)
        report(f"peer {args.peer}", out["peer"])
    print(f"load average at start: {out['machine']['loadavg_at_start']}, "
          f"now: {[round(x, 2) for x in os.getloadavg()]}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
