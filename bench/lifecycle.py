#!/usr/bin/env python3
"""Log lifecycle benchmarks (issue 5): crash recovery time and cleaner throughput.

1. **Recovery after kill -9.** Start ``pybroker serve`` on a fresh data dir, produce ``--gb``
   GB of 1 KiB records to a one-partition topic (confluent-kafka, acks=1, linger.ms=5,
   batch.size=1000000), SIGKILL the broker (nothing was fsynced: the recovery point stays at
   0 with Kafka's default flush settings), restart it on the same dir and time, from the
   ``Popen`` of the new process: the "loaded N partitions" log line (log manager done, i.e.
   interpreter start + config + recovery scan), the first ApiVersions answer and the first
   Metadata answer. Then SIGTERM (clean shutdown) and restart again as the baseline: the
   difference between the two is the recovery scan. After each restart the high watermark
   must equal the number of acknowledged records. The data stays in the page cache
   (a process crash, not a machine crash).
2. **Cleaner throughput.** In process, no broker: a ``PartitionLog`` (segment_bytes
   ``--segment-mb``) gets ``--clean-mb`` MB of 1 KiB values over ``--keys`` distinct keys
   (uniformly random, so ~N updates per key), is rolled so every segment is cleanable, and
   ``PartitionLog.clean(0, ...)`` is timed. Reported: dirty MB (on-disk bytes of the
   non-active segments) per second, and the CleanStats. Once per codec in ``--codecs``
   (none, gzip, snappy, lz4, zstd; compressed batches are built with kafka-python).

Examples:
    python bench/lifecycle.py                              # 1 GB recovery, 256 MB clean
    python bench/lifecycle.py --gb 0.1 --clean-mb 64 --json out.json
    python bench/lifecycle.py --skip-recovery --codecs none,zstd,gzip
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import (  # noqa: E402
    _LIVE,
    LOOPBACK,
    _stop_process,
    create_topic,
    free_port,
    machine_info,
    pybroker_command,
)

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install '.[bench]'")

RECORD_SIZE = 1024
TOPIC = "lifecycle"
LOADED_RE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO loaded (\d+) partitions")

# --------------------------------------------------------------------------------------------
# 1. recovery


def api_versions(host: str, port: int, timeout: float) -> bool:
    """One ApiVersions v0 round trip on a raw socket; True when it answers error 0."""
    client_id = b"lifecycle-bench"
    header = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(header)) + header)
        buf = b""
        while len(buf) < 4:
            chunk = s.recv(65536)
            if not chunk:
                return False
            buf += chunk
        size = struct.unpack_from(">i", buf)[0]
        while len(buf) < 4 + size:
            chunk = s.recv(65536)
            if not chunk:
                return False
            buf += chunk
    corr, error = struct.unpack_from(">ih", buf, 4)
    return corr == 1 and error == 0


class Broker:
    """`pybroker serve` on a fixed data dir and port; restartable."""

    def __init__(self, data_dir: Path, port: int, log_dir: Path, cmd: list[str]) -> None:
        self.data_dir = data_dir
        self.port = port
        self.log_dir = log_dir
        self.cmd = cmd + [
            "serve",
            "--override", f"listeners=PLAINTEXT://{LOOPBACK}:{port}",
            "--override", f"log.dirs={data_dir}",
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self, timeout: float) -> dict[str, float | None]:
        """Start and wait until it answers; seconds from Popen to each milestone."""
        self.starts += 1
        self.log_path = self.log_dir / f"broker-{self.starts}.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.log_path, "wb") as log:
            wall0 = time.time()
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(
                self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True,
            )
        _LIVE.append(self.proc)
        deadline = t0 + timeout
        t_api = None
        while t_api is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited ({self.proc.returncode}):\n{self.log_tail()}")
            if time.perf_counter() > deadline:
                raise TimeoutError(f"broker not ready after {timeout}s:\n{self.log_tail()}")
            try:
                if api_versions(LOOPBACK, self.port, 2.0):
                    t_api = time.perf_counter() - t0
                    break
            except OSError:
                pass
            time.sleep(0.005)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        admin.list_topics(timeout=max(1.0, deadline - time.perf_counter()))
        t_meta = time.perf_counter() - t0
        return {"loaded_s": self._loaded_at(wall0), "api_versions_s": t_api,
                "metadata_s": t_meta}

    def _loaded_at(self, wall0: float) -> float | None:
        """Seconds from Popen to the timestamp of the "loaded N partitions" line (ms)."""
        assert self.log_path is not None
        for line in self.log_path.read_text(errors="replace").splitlines():
            m = LOADED_RE.match(line)
            if m:
                stamp = _dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
                return stamp.timestamp() - wall0
        return None

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        _stop_process(self.proc)  # reaps, removes from _LIVE
        self.proc = None

    def stop(self) -> None:
        assert self.proc is not None
        _stop_process(self.proc, grace=60.0)
        self.proc = None


def produce_gb(bootstrap: str, gb: float, timeout: float) -> tuple[int, int, float]:
    """Produce gb GB of 1 KiB records; (acknowledged, failed, seconds)."""
    total = int(gb * 1e9 / RECORD_SIZE)
    acked = failed = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked, failed
        if err is None:
            acked += 1
        else:
            failed += 1

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                  "batch.size": 1_000_000, "compression.type": "none", "log_level": 0,
                  "queue.buffering.max.kbytes": 1_048_576})
    payload = os.urandom(RECORD_SIZE)
    t0 = time.perf_counter()
    for _ in range(total):
        while True:
            try:
                p.produce(TOPIC, payload, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(timeout)
    secs = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered after {timeout}s")
    return acked, failed, secs


def watermarks(bootstrap: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lifecycle-bench",
                  "enable.auto.commit": False, "log_level": 0})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
        return int(low), int(high)
    finally:
        c.close()


def dir_state(data_dir: Path) -> dict[str, Any]:
    part = data_dir / f"{TOPIC}-0"
    segs = sorted(part.glob("*.log"))
    rp = data_dir / "recovery-point-offset-checkpoint"
    return {
        "segments": len(segs),
        "log_bytes": sum(s.stat().st_size for s in segs),
        "clean_shutdown_marker": (data_dir / ".kafka_cleanshutdown").exists(),
        "recovery_point_checkpoint": rp.read_text().split("\n") if rp.exists() else None,
    }


def run_recovery(args: argparse.Namespace) -> dict[str, Any]:
    tmp = tempfile.TemporaryDirectory(prefix="bench-lifecycle-")
    root = Path(tmp.name)
    data = root / "data"
    data.mkdir()
    broker = Broker(data, free_port(), root, pybroker_command(args.pybroker_cmd))
    out: dict[str, Any] = {"gb": args.gb, "record_size": RECORD_SIZE,
                           "command": " ".join(shlex.quote(a) for a in broker.cmd)}
    try:
        out["cold_start"] = broker.start(args.startup_timeout)
        create_topic(broker.bootstrap, TOPIC, 1, 30.0)
        print(f"recovery: producing {args.gb} GB of {RECORD_SIZE} B records ...", flush=True)
        acked, failed, secs = produce_gb(broker.bootstrap, args.gb, args.timeout)
        out.update(acked=acked, failed=failed, produce_s=secs,
                   produce_mb_s=acked * RECORD_SIZE / 1e6 / secs)
        out["hw_before_kill"] = watermarks(broker.bootstrap)[1]
        print(f"  {acked:,} records acknowledged ({failed} failed) in {secs:.1f}s, "
              f"HW {out['hw_before_kill']:,}", flush=True)
        broker.kill9()
        out["after_kill"] = dir_state(data)
        print(f"  kill -9: {out['after_kill']}", flush=True)

        runs = []
        for i, kind in enumerate(args.sequence.split(",")):
            if i == 0:
                pass  # the kill -9 right after producing
            elif kind == "crash":
                broker.kill9()
            elif kind == "clean":
                broker.stop()
            else:
                raise ValueError(kind)
            state = dir_state(data)
            t = broker.start(args.startup_timeout)
            hw = watermarks(broker.bootstrap)[1]
            run = {"kind": kind, **t, "hw": hw, "hw_ok": hw == acked,
                   "marker_before_start": state["clean_shutdown_marker"]}
            runs.append(run)
            print(f"  restart after {kind:5s}: loaded {fmt_s(t['loaded_s'])}  ApiVersions "
                  f"{fmt_s(t['api_versions_s'])}  Metadata {fmt_s(t['metadata_s'])}  "
                  f"HW {hw:,} {'ok' if hw == acked else 'MISMATCH'}", flush=True)
        out["restarts"] = runs
        broker.stop()
    finally:
        if broker.proc is not None:
            print(broker.log_tail(), file=sys.stderr)
            _stop_process(broker.proc, grace=5.0)
        tmp.cleanup()
    crash = [r for r in out["restarts"] if r["kind"] == "crash"]
    clean = [r for r in out["restarts"] if r["kind"] == "clean"]
    if crash and clean:
        summary = {}
        for key in ("loaded_s", "api_versions_s", "metadata_s"):
            c = [r[key] for r in crash if r[key] is not None]
            b = [r[key] for r in clean if r[key] is not None]
            if c and b:
                summary[key] = {"crash_min": min(c), "clean_min": min(b),
                                "recovery_s": min(c) - min(b)}
        out["summary"] = summary
    out["hw_all_ok"] = all(r["hw_ok"] for r in out["restarts"])
    return out


def fmt_s(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}s"


# --------------------------------------------------------------------------------------------
# 2. cleaner

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BATCH_RECORDS = 500


def build_batches(codec: str, keys: list[bytes], values: list[bytes], ts: int) -> bytes:
    if codec == "none":
        from pybroker import _core
        return _core.build_batch(keys, values, ts)
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(2, CODECS[codec], False, -1, -1, -1, 1 << 30)
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        b.append(i, ts, k, v, [])
    return bytes(b.build())


def run_clean(args: argparse.Namespace, codec: str) -> dict[str, Any]:
    from pybroker import _core

    rng = random.Random(42)
    n = int(args.clean_mb * 1e6 / RECORD_SIZE)
    key_names = [b"key-%06d" % i for i in range(args.keys)]
    tmp = tempfile.TemporaryDirectory(prefix="bench-clean-")
    try:
        path = os.path.join(tmp.name, "compacted-0")
        seg = int(args.segment_mb * 1024 * 1024)
        plog = _core.PartitionLog(path, segment_bytes=seg)
        now_ms = int(time.time() * 1000)
        used: set[bytes] = set()
        t0 = time.perf_counter()
        written = 0
        while written < n:
            count = min(BATCH_RECORDS, n - written)
            keys = [key_names[rng.randrange(args.keys)] for _ in range(count)]
            used.update(keys)
            # hex of random bytes: unique per record, compresses to about half
            values = [os.urandom(RECORD_SIZE // 2).hex().encode() for _ in range(count)]
            plog.append(build_batches(codec, keys, values, now_ms - 60_000), 0, now_ms)
            written += count
        plog.roll()
        build_s = time.perf_counter() - t0
        infos = plog.segment_infos()
        dirty_bytes = sum(size for _base, size, _ts in infos[:-1])
        size_before = plog.size_bytes
        t0 = time.perf_counter()
        stats = plog.clean(0, now_ms=now_ms + 1000)
        secs = time.perf_counter() - t0
        res = {
            "codec": codec, "records": n, "distinct_keys": len(used),
            "payload_mb": n * RECORD_SIZE / 1e6, "segment_bytes": seg,
            "segments_before": len(infos), "dirty_bytes": dirty_bytes,
            "log_bytes_before": size_before, "log_bytes_after": plog.size_bytes,
            "segments_after": plog.segment_count, "build_s": build_s, "clean_s": secs,
            "dirty_mb_per_s": dirty_bytes / 1e6 / secs,
            "bytes_read": stats.bytes_read, "bytes_written": stats.bytes_written,
            "records_removed": stats.records_removed,
            "segments_cleaned": stats.segments_cleaned,
            "first_dirty_offset": stats.first_dirty_offset,
            "records_kept": n - stats.records_removed,
        }
        res["kept_ok"] = res["records_kept"] == len(used)
        plog.close()
        return res
    finally:
        tmp.cleanup()


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0, help="GB to produce before kill -9")
    ap.add_argument("--sequence", default="crash,clean,crash,clean",
                    help="restarts, in order: the first must be 'crash' (the kill -9 right "
                         "after producing); each further 'crash' is another kill -9 (a "
                         "recovery scan again), each 'clean' a SIGTERM (the baseline)")
    ap.add_argument("--clean-mb", type=float, default=256.0,
                    help="MB of record values in the log to compact")
    ap.add_argument("--keys", type=int, default=10_000, help="distinct keys")
    ap.add_argument("--segment-mb", type=float, default=64.0, help="segment_bytes in MiB")
    ap.add_argument("--codecs", default="none,zstd",
                    help="codecs for the cleaner runs (none,gzip,snappy,lz4,zstd)")
    ap.add_argument("--skip-recovery", action="store_true")
    ap.add_argument("--skip-clean", action="store_true")
    ap.add_argument("--pybroker-cmd", help="command that starts pybroker, before 'serve'")
    ap.add_argument("--timeout", type=float, default=600.0, help="produce timeout (s)")
    ap.add_argument("--startup-timeout", type=float, default=120.0)
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)
    if args.sequence.split(",")[0] != "crash":
        ap.error("--sequence must start with crash (the kill -9 after producing)")
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    if any(c not in CODECS for c in codecs):
        ap.error(f"--codecs: one of {', '.join(CODECS)}")

    result: dict[str, Any] = {
        "command": " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
    }
    ok = True
    if not args.skip_recovery:
        rec = run_recovery(args)
        result["recovery"] = rec
        ok &= rec["hw_all_ok"]
        if "summary" in rec:
            for key, s in rec["summary"].items():
                print(f"  {key:15s} after kill -9 {s['crash_min']:.3f}s, after SIGTERM "
                      f"{s['clean_min']:.3f}s: recovery {s['recovery_s']:.3f}s")
    if not args.skip_clean:
        result["clean"] = []
        for codec in codecs:
            print(f"cleaner: {args.clean_mb} MB, {args.keys:,} keys, codec {codec} ...",
                  flush=True)
            r = run_clean(args, codec)
            result["clean"].append(r)
            ok &= r["kept_ok"]
            print(f"  {r['dirty_bytes'] / 1e6:,.1f} MB dirty in {r['segments_before'] - 1} "
                  f"segments cleaned in {r['clean_s']:.3f}s = {r['dirty_mb_per_s']:,.0f} MB/s; "
                  f"read {r['bytes_read'] / 1e6:,.1f} MB, wrote {r['bytes_written'] / 1e6:,.1f} "
                  f"MB, removed {r['records_removed']:,} of {r['records']:,} records, kept "
                  f"{r['records_kept']:,} ({'ok' if r['kept_ok'] else 'MISMATCH'} vs "
                  f"{r['distinct_keys']:,} keys)", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"JSON results: {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
