#!/usr/bin/env python3
"""How long a segment append waits in the kernel once GBs of dirty pages are being
written back (issue 26, the tail after a bulk load), without a broker.

Writes `--bulk-mb` MB to a file (the bulk load: the page cache fills with dirty pages
up to the kernel's background threshold, and its flusher starts writing them back),
then appends 20 KiB every millisecond (20,000 records/s of 1 KiB) to another file for
`--seconds` and times each write(). With `--reserve` the appended file's blocks are
reserved first (fallocate FALLOC_FL_KEEP_SIZE). `--reserve-chunks inline` reserves them
as the log did from 2bd1f48: 16 MiB at a time, by the appending thread when an append
passes the reserved end; `--reserve-chunks thread` as it does now: by a worker thread,
asked when an append passes half of the last chunk, so the appends never wait for it.
The fallocate calls are timed too. With `--write-behind` both files' data is
written back as they grow: sync_file_range(SYNC_FILE_RANGE_WRITE) on a worker thread,
4 MiB at a time, a MiB behind the end, so the bulk load leaves a few MB dirty instead of
the ~2 GB the flusher otherwise takes on during the appends. (The log did this itself from
f4afe5c until its revert: it cost 0.15-0.3 broker CPU s/GB and showed no gain in the
tail after a bulk load; bench/RESULTS.md, the end-of-session quiet section of
2026-11-28 10:27 UTC.)
On ext4, an append past the allocated blocks reserves them under the inode's
i_data_sem, which writeback holds while it allocates that file's blocks; run under
`perf record -e sched:sched_switch -g` to see where a slow write waited. Files go to
`--dir` (default: a temp dir in the current directory), removed at the end.

Example (the two cases one after the other):
    python bench/append_stall.py --bulk-mb 3500 --seconds 12
    python bench/append_stall.py --bulk-mb 3500 --seconds 12 --reserve
    python bench/append_stall.py --bulk-mb 3500 --seconds 12 --reserve-chunks thread --write-behind
"""

from __future__ import annotations

import argparse
import ctypes
import os
import queue
import tempfile
import threading
import time

CHUNK = 20480
FALLOC_FL_KEEP_SIZE = 1
RESERVE_CHUNK = 16 << 20
WRITEBACK_CHUNK = 4 << 20
WRITEBACK_LAG = 1 << 20
SYNC_FILE_RANGE_WRITE = 2


def vmstat_mb() -> dict[str, int]:
    found = {}
    with open("/proc/vmstat") as f:
        for line in f:
            key, value = line.split()
            if key in ("nr_dirty", "nr_writeback"):
                found[key] = int(value) * 4096 >> 20
    return found


def reserve(fd: int, size: int, offset: int = 0) -> float:
    """fallocate(KEEP_SIZE) of [offset, offset + size); returns how long it took, ms."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    before = time.perf_counter()
    if libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, size) != 0:
        raise OSError(ctypes.get_errno(), "fallocate")
    return (time.perf_counter() - before) * 1000


class Reserver:
    """Reserves the appended file's blocks 16 MiB at a time, inline or on a worker
    thread, as the log's active segment does (rust/log/src/segment.rs)."""

    def __init__(self, fd: int, mode: str) -> None:
        self.fd = fd
        self.mode = mode
        self.asked = 0
        self.took: list[float] = []
        self.jobs: queue.Queue[int | None] = queue.Queue()
        if mode == "thread":
            self.worker = threading.Thread(target=self._work, daemon=True)
            self.worker.start()

    def _work(self) -> None:
        while (offset := self.jobs.get()) is not None:
            self.took.append(reserve(self.fd, RESERVE_CHUNK, offset))

    def appended(self, end: int) -> None:
        if self.mode == "inline" and end > self.asked:
            self.took.append(reserve(self.fd, RESERVE_CHUNK, self.asked))
            self.asked += RESERVE_CHUNK
        elif self.mode == "thread" and end + RESERVE_CHUNK // 2 > self.asked:
            self.jobs.put(self.asked)
            self.asked += RESERVE_CHUNK

    def stop(self) -> None:
        if self.mode == "thread":
            self.jobs.put(None)
            self.worker.join()


class WriteBehind:
    """Starts the writeback of a growing file's data a MiB behind its end, 4 MiB at a
    time, on a worker thread, as the log's segments did from f4afe5c until its revert."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_long,
                                              ctypes.c_uint]
        self.jobs: queue.Queue[tuple[int, int, int] | None] = queue.Queue()
        self.done: dict[int, int] = {}
        self.worker = threading.Thread(target=self._work, daemon=True)
        self.worker.start()

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            fd, offset, length = job
            self.libc.sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE)

    def appended(self, fd: int, end: int) -> None:
        settled = max(0, end - WRITEBACK_LAG) // 4096 * 4096
        done = self.done.get(fd, 0)
        if settled >= done + WRITEBACK_CHUNK:
            self.jobs.put((fd, done, settled - done))
            self.done[fd] = settled

    def stop(self) -> None:
        self.jobs.put(None)
        self.worker.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bulk-mb", type=int, default=3500)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--reserve", action="store_true",
                    help="reserve the appended file's blocks first")
    ap.add_argument("--reserve-chunks", choices=("inline", "thread"),
                    help="reserve 16 MiB at a time as appends go: by the appending thread "
                         "or ahead by a worker thread")
    ap.add_argument("--write-behind", action="store_true",
                    help="start the writeback of both files' data as they grow")
    ap.add_argument("--dir", default=".")
    args = ap.parse_args()
    behind = WriteBehind() if args.write_behind else None
    with tempfile.TemporaryDirectory(prefix="append-stall-", dir=args.dir) as tmp:
        if args.bulk_mb:
            fd = os.open(os.path.join(tmp, "bulk"), os.O_CREAT | os.O_WRONLY, 0o644)
            block = b"x" * (1 << 20)
            started = time.monotonic()
            for i in range(args.bulk_mb):
                os.write(fd, block)
                if behind is not None:
                    behind.appended(fd, (i + 1) << 20)
            if behind is not None:
                behind.jobs.put((fd, 0, 0))  # the rest, as at a roll (0: to the end)
            else:
                os.close(fd)
            print(f"bulk: {args.bulk_mb} MB written in {time.monotonic() - started:.1f} s; "
                  f"{vmstat_mb()}")
        fd = os.open(os.path.join(tmp, "segment"), os.O_CREAT | os.O_WRONLY | os.O_APPEND,
                     0o644)
        if args.reserve:
            reserve(fd, int(args.seconds * 1000 * CHUNK) + (16 << 20))
        reserver = Reserver(fd, args.reserve_chunks) if args.reserve_chunks else None
        chunk = b"y" * CHUNK
        took: list[float] = []
        peak: dict[str, int] = {}
        start = time.monotonic()
        while time.monotonic() - start < args.seconds:
            before = time.perf_counter()
            if reserver is not None:
                reserver.appended((len(took) + 1) * CHUNK)
            os.write(fd, chunk)
            took.append((time.perf_counter() - before) * 1000)
            if behind is not None:
                behind.appended(fd, len(took) * CHUNK)
            if len(took) % 500 == 0:
                for key, value in vmstat_mb().items():
                    peak[key] = max(peak.get(key, 0), value)
            pause = start + len(took) / 1000 - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        if reserver is not None:
            reserver.stop()
        if behind is not None:
            behind.stop()
        os.close(fd)
        for other in (behind.done if behind is not None else ()):
            if other != fd:
                os.close(other)
    took.sort()

    def q(p: float) -> float:
        return took[min(len(took) - 1, int(p / 100 * len(took)))]

    mode = " (reserved)" if args.reserve else ""
    if reserver is not None:
        mode = f" (reserved 16 MiB at a time, {args.reserve_chunks})"
        print(f"fallocate calls: {len(reserver.took)}, max {max(reserver.took, default=0):.1f} "
              f"ms, sum {sum(reserver.took):.1f} ms")
    if args.write_behind:
        mode += " (written behind)"
    print(f"appends{mode}: {len(took)}, p50 {q(50):.3f} "
          f"p99 {q(99):.3f} p99.9 {q(99.9):.3f} max {took[-1]:.1f} ms; over 1 ms "
          f"{sum(t > 1 for t in took)}, over 5 ms {sum(t > 5 for t in took)}; dirty/writeback "
          f"MB max {peak}; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
