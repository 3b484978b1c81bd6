#!/usr/bin/env python3
"""What the kernel alone costs for a broker's data path on this machine.

A Kafka-style broker moves produced bytes socket -> page cache and fetched bytes page cache ->
socket (sendfile). This measures those kernel paths with no broker at all, so the broker's
"CPU s/GB" in bench/throughput.py can be read against the machine's floor:

  page-cache write        os.write of 1 MiB chunks to a new file (no fsync), twice: the
                          first run touches memory the machine has not used lately, the
                          second reuses the pages the first freed (VMs that back guest memory
                          lazily, or return freed pages to the host, charge the first touch)
  loopback receive+write  what a broker's produce path cannot avoid: recv_into a 1 MiB buffer
                          from a loopback TCP socket (fed by another process as fast as it can)
                          and os.write it to a file; CPU of the receiving process
  loopback sendfile       what a broker's fetch path cannot avoid: sendfile(2) of a cached
                          file to a loopback TCP socket (drained by another process); CPU of
                          the sending process

The socket cases run with Kafka's default socket buffers (socket.receive.buffer.bytes and
socket.send.buffer.bytes = 102400, which pybroker applies like Kafka) and with the OS's
autotuned buffers (-1). CPU is user+sys of the measuring process (getrusage).

    python bench/floor.py                 # 1 GB per case, data in a temp dir under ./
    python bench/floor.py --gb 0.5 --dir /var/tmp --json floor.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import resource
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import machine_info  # noqa: E402

CHUNK = 1 << 20
#: Kafka's default socket.send.buffer.bytes / socket.receive.buffer.bytes
KAFKA_SOCKET_BUFFER = 102400


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Measure:
    """CPU and wall time of the calling process over a block."""

    def __enter__(self) -> Measure:
        self.cpu0, self.t0 = cpu_seconds(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu = cpu_seconds() - self.cpu0
        self.wall = time.perf_counter() - self.t0

    def result(self, case: str, nbytes: int) -> dict[str, Any]:
        gb = nbytes / 1e9
        return {"case": case, "bytes": nbytes, "seconds": self.wall,
                "mb_per_s": nbytes / 1e6 / self.wall, "cpu_s_per_gb": self.cpu / gb}


def write_file(path: Path, chunks: int) -> None:
    data = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(chunks):
            os.write(fd, data)
    finally:
        os.close(fd)


def page_cache_write(directory: Path, chunks: int) -> list[dict[str, Any]]:
    results = []
    for label in ("first touch", "reused pages"):
        path = directory / "floor-write"
        with Measure() as m:
            write_file(path, chunks)
        results.append(m.result(f"page-cache write ({label})", chunks * CHUNK))
        path.unlink()
    return results


def _feed(port: int, chunks: int) -> None:
    data = os.urandom(CHUNK)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(chunks):
            sock.sendall(data)


def _drain(port: int, nbytes: int) -> None:
    buf = bytearray(CHUNK)
    got = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while got < nbytes:
            n = sock.recv_into(buf)
            if n == 0:
                break
            got += n


def connect_peer(peer: Callable[[int, int], None], arg: int, option: int,
                 size: int) -> tuple[socket.socket, BaseProcess]:
    """Run peer(port, arg) in a child process and accept its loopback connection, with the
    socket buffer `option` set to `size` bytes (-1: left to the OS)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        process = mp.get_context("fork").Process(target=peer,
                                                 args=(server.getsockname()[1], arg))
        process.start()
        conn, _ = server.accept()
    # plain blocking calls, whatever socket.setdefaulttimeout the caller runs under
    conn.setblocking(True)
    if size > 0:
        conn.setsockopt(socket.SOL_SOCKET, option, size)
    return conn, process


def buffer_label(option_name: str, size: int) -> str:
    return f"{option_name} " + ("Kafka's 102400" if size > 0 else "OS autotuned")


def receive_and_write(directory: Path, chunks: int, rcvbuf: int) -> dict[str, Any]:
    path = directory / "floor-receive"
    conn, feeder = connect_peer(_feed, chunks, socket.SO_RCVBUF, rcvbuf)
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with Measure() as m, conn:
            for _ in range(chunks):
                filled = 0
                while filled < CHUNK:
                    n = conn.recv_into(view[filled:])
                    if n == 0:
                        raise RuntimeError("feeder closed early")
                    filled += n
                os.write(fd, view)
    finally:
        os.close(fd)
        feeder.join()
        path.unlink()
    return m.result(f"loopback receive+write, {buffer_label('SO_RCVBUF', rcvbuf)}",
                    chunks * CHUNK)


def sendfile_out(directory: Path, chunks: int, sndbuf: int) -> dict[str, Any]:
    path = directory / "floor-send"
    write_file(path, chunks)
    nbytes = chunks * CHUNK
    with open(path, "rb") as f:
        while f.read(CHUNK * 8):  # into the page cache, as a broker's recent data is
            pass
    conn, drainer = connect_peer(_drain, nbytes, socket.SO_SNDBUF, sndbuf)
    fd = os.open(path, os.O_RDONLY)
    try:
        with Measure() as m, conn:
            offset = 0
            while offset < nbytes:
                offset += os.sendfile(conn.fileno(), fd, offset, min(CHUNK, nbytes - offset))
    finally:
        os.close(fd)
        drainer.join()
        path.unlink()
    return m.result(f"loopback sendfile, {buffer_label('SO_SNDBUF', sndbuf)}", nbytes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0, help="GB per case (default 1)")
    ap.add_argument("--dir", type=Path, default=Path.cwd(),
                    help="filesystem to write on (default: the current directory)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    chunks = max(1, int(args.gb * 1e9 / CHUNK))
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pybroker-floor-", dir=args.dir) as tmp:
        directory = Path(tmp)
        steps = [
            lambda: page_cache_write(directory, chunks),
            lambda: [receive_and_write(directory, chunks, KAFKA_SOCKET_BUFFER)],
            lambda: [receive_and_write(directory, chunks, -1)],
            lambda: [sendfile_out(directory, chunks, KAFKA_SOCKET_BUFFER)],
            lambda: [sendfile_out(directory, chunks, -1)],
        ]
        print(f"{'case':58} {'MB/s':>8} {'CPU s/GB':>9}")
        for step in steps:
            for r in step():
                results.append(r)
                print(f"{r['case']:58} {r['mb_per_s']:8.0f} {r['cpu_s_per_gb']:9.2f}",
                      flush=True)
    if args.json:
        doc = {"meta": {"command": "bench/floor.py " + " ".join(argv or sys.argv[1:]),
                        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                        "machine": machine_info()},
               "results": results}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
