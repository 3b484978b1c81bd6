#!/usr/bin/env python3
"""Resource exhaustion (issue 11): what misbehaving clients cost a pybroker.

Starts ``pybroker serve`` on a free loopback port with a fresh data directory, then
runs each scenario against it with raw sockets, reading the broker's RSS and open
file descriptors off the process (psutil) before, during and after, and checking
after each phase that the broker still serves (a produce + fetch round trip on a
fresh connection; its time is reported). Everything is bounded in count and time,
and loopback only.

Scenarios (``--scenarios``, all by default):

- ``idle``: ``--idle`` connections that each send one ApiVersions, then sit idle;
- ``claims``: ``--claims`` connections that each send a 14-byte frame start claiming
  100 MB, then nothing;
- ``slow-writers``: ``--slow`` connections each sending a 1 MiB produce request at
  about 5 KiB/s for ``--slow-seconds``;
- ``never-read``: ``--never-read`` consumers (SO_RCVBUF 4 KiB) that each ask for a
  4 MiB fetch and never read the answer;
- ``mid-response``: ``--rounds`` consumers that close (RST) while their 4 MiB fetch
  response is being sent;
- ``long-poll-leavers``: ``--leavers`` consumers that send a long-poll fetch
  (max_wait 60 s) and close; reported: how long until their sockets and purgatory
  entries are gone.

Examples:
    python bench/exhaustion.py
    python bench/exhaustion.py --scenarios idle,claims --idle 5000
    python bench/exhaustion.py --json out.json --override connections.max.idle.ms=600000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:
    import psutil

    from pybroker import _core
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install -e '.[test]'")

LOOPBACK = "127.0.0.1"
MiB = 1 << 20
SCENARIOS = ("idle", "claims", "slow-writers", "never-read", "mid-response",
             "long-poll-leavers")
API_PRODUCE, API_FETCH, API_METADATA, API_VERSIONS = 0, 1, 3, 18
WAIT_S = 30.0


# --- wire -----------------------------------------------------------------------------
def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def request(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    payload = struct.pack(">hhi", api_key, version, corr) + string("exhaustion") + body
    return i32(len(payload)) + payload


def produce_request(topic: str, batch: bytes, corr: int = 1) -> bytes:
    part = i32(0) + i32(len(batch)) + batch
    body = string(None) + i16(1) + i32(30000) + i32(1) + string(topic) + i32(1) + part
    return request(API_PRODUCE, 3, corr, body)


def fetch_request(topic: str, offset: int, max_wait_ms: int, max_bytes: int,
                  corr: int = 1) -> bytes:
    part = i32(0) + i64(offset) + i32(max_bytes)
    body = (i32(-1) + i32(max_wait_ms) + i32(1) + i32(max_bytes) + b"\x00" + i32(1)
            + string(topic) + i32(1) + part)
    return request(API_FETCH, 4, corr, body)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def round_trip(sock: socket.socket, frame: bytes) -> bytes:
    sock.sendall(frame)
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection((LOOPBACK, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def batch(count: int, size: int) -> bytes:
    return _core.build_batch([None] * count, [os.urandom(size) for _ in range(count)],
                             int(time.time() * 1000))


# --- the broker -------------------------------------------------------------------------
class Broker:
    def __init__(self, overrides: list[str]) -> None:
        self.port = free_port()
        self.metrics_port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="exhaustion-"))
        cmd = [sys.executable, "-m", "pybroker", "serve",
               "--override", f"listeners=PLAINTEXT://{LOOPBACK}:{self.port}",
               "--override", f"log.dirs={self.dir / 'data'}",
               "--override", f"metrics.port={self.metrics_port}"]
        for item in overrides:
            cmd += ["--override", item]
        self.log = open(self.dir / "broker.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.ps = psutil.Process(self.proc.pid)
        wait_until(self.serves, "the broker to start")

    def serves(self) -> bool:
        try:
            with connect(self.port, timeout=2) as s:
                return len(round_trip(s, request(API_VERSIONS, 0, 1, b""))) > 6
        except OSError:
            return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_mib(self) -> float:
        return self.ps.memory_info().rss / MiB

    def fds(self) -> int:
        return self.ps.num_fds()

    def client_sockets(self) -> int:
        return sum(1 for c in self.ps.net_connections(kind="tcp")
                   if c.laddr and c.laddr.port == self.port and c.raddr)

    def gauge(self, name: str, label: str = "") -> float:
        url = f"http://{LOOPBACK}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith(name + label + " "):
                    return float(line.rsplit(" ", 1)[1])
        return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def wait_until(cond: Callable[[], bool], what: str, timeout: float = WAIT_S) -> float:
    """Seconds it took; raises after `timeout`."""
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
    return time.monotonic() - start


def probe(b: Broker, topic: str = "probe") -> float | None:
    """A produce + fetch round trip on a fresh connection, in ms; None if it failed."""
    start = time.monotonic()
    try:
        with connect(b.port, timeout=10) as s:
            resp = round_trip(s, produce_request(topic, batch(1, 100)))
            error = struct.unpack_from(">h", resp, 4 + 4 + 2 + len(topic) + 4 + 4)[0]
            offset = struct.unpack_from(">q", resp, 4 + 4 + 2 + len(topic) + 4 + 4 + 2)[0]
            if error:
                return None
            round_trip(s, fetch_request(topic, offset, 100, MiB))
    except OSError:
        return None
    return (time.monotonic() - start) * 1000


def ensure_topic(b: Broker, topic: str) -> None:
    body = i32(1) + string(topic) + b"\x01"  # Metadata v4, allow auto creation
    with connect(b.port) as s:
        round_trip(s, request(API_METADATA, 4, 1, body))
    wait_until(lambda: probe(b, topic) is not None, f"topic {topic}")


def fill(b: Broker, topic: str, total: int) -> None:
    ensure_topic(b, topic)
    with connect(b.port) as s:
        for _ in range(total // (10 * 100_000)):
            round_trip(s, produce_request(topic, batch(10, 100_000)))


@contextmanager
def sockets(b: Broker, n: int, rcvbuf: int = 0) -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket()
            if rcvbuf:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            s.settimeout(10)
            s.connect((LOOPBACK, b.port))
            socks.append(s)
        yield socks
    finally:
        for s in socks:
            s.close()


# --- scenarios --------------------------------------------------------------------------
class Figures:
    def __init__(self, b: Broker, name: str, count: int, what: str) -> None:
        self.b = b
        self.row: dict[str, Any] = {"scenario": name, "clients": count, "what": what}
        self.row["rss_before_mib"], self.row["fds_before"] = b.rss_mib(), b.fds()

    def during(self) -> None:
        self.row["rss_during_mib"], self.row["fds_during"] = self.b.rss_mib(), self.b.fds()
        self.row["probe_during_ms"] = probe(self.b)

    def after(self, **extra: Any) -> dict[str, Any]:
        b = self.b
        wait_until(lambda: b.client_sockets() == 0 or not b.alive(), "client sockets to close")
        self.row["rss_after_mib"], self.row["fds_after"] = b.rss_mib(), b.fds()
        self.row["probe_after_ms"] = probe(b)
        self.row["alive"] = b.alive() and self.row["probe_after_ms"] is not None
        self.row.update(extra)
        return self.row


def idle(b: Broker, n: int) -> dict[str, Any]:
    fig = Figures(b, "idle", n, "connect, one ApiVersions, stay idle")
    with sockets(b, n) as socks:
        for s in socks:
            s.sendall(request(API_VERSIONS, 0, 1, b""))
        for s in socks:
            (size,) = struct.unpack(">i", recv_exact(s, 4))
            recv_exact(s, size)
        wait_until(lambda: b.client_sockets() >= n, f"{n} connections")
        fig.during()
    row = fig.after()
    row["kib_per_connection"] = (row["rss_during_mib"] - row["rss_before_mib"]) * 1024 / n
    return row


def claims(b: Broker, n: int) -> dict[str, Any]:
    fig = Figures(b, "claims", n, "14 bytes claiming a 100 MB request, then nothing")
    claim = i32(100_000_000) + struct.pack(">hhih", API_PRODUCE, 3, 1, 10)  # 14 bytes
    with sockets(b, n) as socks:
        for s in socks:
            s.sendall(claim)
        wait_until(lambda: b.client_sockets() >= n, f"{n} connections")
        probe(b)  # answered after the claims were read
        time.sleep(0.5)
        fig.during()
    return fig.after(claimed_mib=n * 100_000_000 / MiB)


def slow_writers(b: Broker, n: int, seconds: float) -> dict[str, Any]:
    fig = Figures(b, "slow-writers", n,
                  f"a 1 MiB produce request at ~5 KiB/s each for {seconds:.0f} s")
    chunk = os.urandom(1024)
    sent = 0
    with sockets(b, n) as socks:
        for s in socks:
            s.sendall(i32(MiB) + struct.pack(">hhi", API_PRODUCE, 3, 1))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for s in socks:
                s.sendall(chunk)
                sent += len(chunk)
            time.sleep(0.2)
        fig.during()
    return fig.after(sent_mib=sent / MiB)


def never_read(b: Broker, n: int) -> dict[str, Any]:
    fill(b, "big", 4 * MiB)
    fig = Figures(b, "never-read", n, "ask for a 4 MiB fetch, never read (SO_RCVBUF 4 KiB)")
    with sockets(b, n, rcvbuf=4096) as socks:
        for s in socks:
            s.sendall(fetch_request("big", 0, 100, 64 * MiB))
        wait_until(lambda: all(s.recv(4, socket.MSG_PEEK) for s in socks), "responses to start")
        fig.during()
    return fig.after()


def mid_response(b: Broker, rounds: int) -> dict[str, Any]:
    fill(b, "big", 4 * MiB)
    fig = Figures(b, "mid-response", rounds, "close (RST) while a 4 MiB fetch answer is sent")
    for _ in range(rounds):
        with sockets(b, 1, rcvbuf=4096) as (s,):
            s.sendall(fetch_request("big", 0, 100, 64 * MiB))
            s.recv(4, socket.MSG_PEEK)
            reset(s)
    fig.during()
    return fig.after()


def long_poll_leavers(b: Broker, n: int) -> dict[str, Any]:
    ensure_topic(b, "quiet")
    end = _end_offset(b, "quiet")
    fig = Figures(b, "long-poll-leavers", n, "long-poll fetch (max_wait 60 s), then close")
    with sockets(b, n) as socks:
        for s in socks:
            s.sendall(fetch_request("quiet", end, 60_000, MiB))
        wait_until(lambda: b.gauge("pybroker_purgatory_size", '{operation="fetch"}') >= n,
                   f"{n} fetches waiting")
        fig.during()
    closed = time.monotonic()
    released = wait_until(lambda: b.client_sockets() == 0, "their sockets to close")
    wait_until(lambda: b.gauge("pybroker_purgatory_size", '{operation="fetch"}') == 0,
               "the purgatory to empty")
    emptied = time.monotonic() - closed
    return fig.after(sockets_released_s=released, purgatory_empty_s=emptied)


def _end_offset(b: Broker, topic: str) -> int:
    with connect(b.port) as s:
        resp = round_trip(s, produce_request(topic, batch(1, 10)))
    return int(struct.unpack_from(">q", resp, 4 + 4 + 2 + len(topic) + 4 + 4 + 2)[0]) + 1


# --- report -----------------------------------------------------------------------------
def fmt(v: Any, digits: int = 0) -> str:
    if v is None:
        return "failed"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def print_table(rows: list[dict[str, Any]]) -> None:
    print("| scenario | clients | RSS MiB before / during / after | fds before / during / after "
          "| probe ms during / after | alive | notes |")
    print("|---|---:|---|---|---|---|---|")
    for r in rows:
        notes = []
        if "kib_per_connection" in r:
            notes.append(f"{r['kib_per_connection']:.1f} KiB per idle connection")
        if "claimed_mib" in r:
            notes.append(f"{r['claimed_mib']:,.0f} MiB claimed")
        if "sent_mib" in r:
            notes.append(f"{r['sent_mib']:.1f} MiB sent")
        if "sockets_released_s" in r:
            notes.append(f"sockets released {r['sockets_released_s']:.2f} s, purgatory empty "
                         f"{r['purgatory_empty_s']:.2f} s after the close")
        print(f"| {r['scenario']}: {r['what']} | {fmt(r['clients'])} "
              f"| {fmt(r['rss_before_mib'])} / {fmt(r.get('rss_during_mib'))} / "
              f"{fmt(r['rss_after_mib'])} "
              f"| {fmt(r['fds_before'])} / {fmt(r.get('fds_during'))} / {fmt(r['fds_after'])} "
              f"| {fmt(r.get('probe_during_ms'), 1)} / {fmt(r['probe_after_ms'], 1)} "
              f"| {fmt(r['alive'])} | {'; '.join(notes)} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--idle", type=int, default=2000)
    p.add_argument("--claims", type=int, default=50)
    p.add_argument("--slow", type=int, default=200)
    p.add_argument("--slow-seconds", type=float, default=5.0)
    p.add_argument("--never-read", type=int, default=200)
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--leavers", type=int, default=500)
    p.add_argument("--override", action="append", default=[],
                   help="broker config key=value (repeatable)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    chosen = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = set(chosen) - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenarios {sorted(unknown)}; known: {', '.join(SCENARIOS)}")
    biggest = max(args.idle, args.claims, args.slow, args.never_read, args.leavers)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < biggest + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, biggest + 256), hard))

    runs: dict[str, Callable[[Broker], dict[str, Any]]] = {
        "idle": lambda b: idle(b, args.idle),
        "claims": lambda b: claims(b, args.claims),
        "slow-writers": lambda b: slow_writers(b, args.slow, args.slow_seconds),
        "never-read": lambda b: never_read(b, args.never_read),
        "mid-response": lambda b: mid_response(b, args.rounds),
        "long-poll-leavers": lambda b: long_poll_leavers(b, args.leavers),
    }
    rows = []
    failed = False
    for name in chosen:
        b = Broker(args.override)  # a fresh broker per scenario: figures do not mix
        try:
            ensure_topic(b, "probe")
            for _ in range(50):  # warm up: imports and caches before the baseline
                probe(b)
            rows.append(runs[name](b))
        except Exception as exc:
            failed = True
            print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            serving = probe(b) is not None
            if not serving:  # give a dying broker the time to exit
                try:
                    b.proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
            rows.append({"scenario": name, "error": str(exc), "serving": serving,
                         "exit_code": b.proc.poll()})
        finally:
            b.stop()
    print_table([r for r in rows if "error" not in r])
    for r in rows:
        if "error" in r:
            state = ("still serving" if r["serving"] else
                     f"exited with {r['exit_code']}" if r["exit_code"] is not None
                     else "not serving")
            print(f"\n{r['scenario']} failed: {r['error']} (broker {state})")
    if args.json:
        args.json.write_text(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                         "overrides": args.override, "rows": rows}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
