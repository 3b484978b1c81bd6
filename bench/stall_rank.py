#!/usr/bin/env python3
"""Where the logged event-loop stalls went, ranked (issue 25).

A broker started with ``event.loop.stall.report.ms`` > 0 logs each stall: its length,
how much of it was the cyclic GC, and stack samples of the loop thread taken while it
lasted (pybroker.server.stall_report). This reads such logs (``controller.py
--keep-logs DIR``) and, per phase (the ``event_loop_phases`` of ``controller.py
--json``; one phase without it), adds each stall's time up by where it went:

- the GC's part of the stall goes to "cyclic GC";
- the rest is split over the stall's samples in proportion to how often each was seen
  (a stall with no sample: "no sample");
- a sample counts for its innermost pybroker function (``--inclusive``: for every
  pybroker function on its stack, once each, so a caller such as ``_write_states``
  shows with all it calls). A sample whose innermost frame is the event loop's own run
  (uvloop: its C code, waiting in epoll or doing its own I/O) is "in the loop's C code
  (idle or its own I/O; or the process not scheduled)".

It prints, per phase, the stall time logged by every broker, the GC's share, the
longest stall, and the top places. Examples:

    python bench/controller.py --cluster --partitions 3000 --timeout 300 \\
        --json run.json --keep-logs run-logs
    python bench/stall_rank.py run-logs --json run.json
    python bench/stall_rank.py run-logs --json run.json --inclusive --top 25
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

_STALL = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] WARNING event loop stalled "
                    r"for (\d+) ms .*?of which (\d+) ms in the cyclic GC \((\d+) full "
                    r"collections(?:, (\d+) ms)?")
_LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d ")
_SEEN = re.compile(r"^\s+seen (\d+) time")
_FRAME = re.compile(r"^\s+(\S+):(\d+) in (\S+)")
#: the logger's name that the log format appends to a record's last line
_LOGGER_SUFFIX = re.compile(r" \([\w.]+\)$")

GC = "cyclic GC"
NO_SAMPLE = "no sample"
LOOP_C = "in the loop's C code (idle or its own I/O; or the process not scheduled)"


@dataclass
class Stall:
    broker: str
    when: float
    ms: int
    gc_ms: int
    full_gcs: int
    full_gc_ms: int
    #: (times seen, frames outermost first as "path in function")
    samples: list[tuple[int, list[str]]] = field(default_factory=list)


def read_stalls(path: Path) -> list[Stall]:
    stalls: list[Stall] = []
    current: Stall | None = None
    frames: list[str] | None = None
    for line in path.read_text(errors="replace").splitlines():
        found = _STALL.match(line)
        if found:
            when = time.mktime(time.strptime(found[1], "%Y-%m-%d %H:%M:%S")) + int(found[2]) / 1000
            current = Stall(path.stem, when, int(found[3]), int(found[4]), int(found[5]),
                            int(found[6] or 0))
            stalls.append(current)
            frames = None
            continue
        if current is None:
            continue
        if _LOG_LINE.match(line):
            current = None
            continue
        seen = _SEEN.match(line)
        if seen:
            frames = []
            current.samples.append((int(seen[1]), frames))
            continue
        frame = _FRAME.match(_LOGGER_SUFFIX.sub("", line))
        if frame and frames is not None:
            frames.append(f"{frame[1]} in {frame[3]}")
    return stalls


def places(frames: list[str], inclusive: bool) -> list[str]:
    """What a sample counts for (see the module docstring)."""
    if not frames:
        return [NO_SAMPLE]
    ours = [f for f in frames if f.startswith("pybroker/")]
    innermost = frames[-1]
    if innermost.startswith("asyncio/runners.py") or "selectors.py" in innermost:
        return [LOOP_C]
    if not ours:
        return [innermost]
    if not inclusive:
        # the innermost pybroker function, with the library call it was in, if any
        return [ours[-1] if innermost == ours[-1] else f"{ours[-1]} > {innermost}"]
    unique: list[str] = []
    for f in ours:
        if f not in unique:
            unique.append(f)
    return unique


def rank(stalls: list[Stall], inclusive: bool) -> dict[str, float]:
    spent: dict[str, float] = defaultdict(float)
    for stall in stalls:
        gc_ms = min(stall.gc_ms, stall.ms)
        if gc_ms:
            spent[GC] += gc_ms
        rest = stall.ms - gc_ms
        seen = sum(n for n, _ in stall.samples)
        if not seen:
            spent[NO_SAMPLE] += rest
            continue
        for n, frames in stall.samples:
            for place in places(frames, inclusive):
                spent[place] += rest * n / seen
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", type=Path, nargs="+", help="broker logs, or dirs of *.log")
    parser.add_argument("--json", type=Path, help="controller.py's --json, for its phases")
    parser.add_argument("--inclusive", action="store_true",
                        help="count a sample for every pybroker function on its stack")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    files = [f for p in args.logs for f in (sorted(p.glob("*.log")) if p.is_dir() else [p])]
    stalls = sorted((s for f in files for s in read_stalls(f)), key=lambda s: s.when)
    phases: list[tuple[str, float, float]] = [("all", 0.0, float("inf"))]
    if args.json:
        figures = json.loads(args.json.read_text())
        phases = [tuple(p) for p in figures.get("cluster", figures).get("event_loop_phases")
                  or []] or phases
    for name, t0, t1 in phases:
        inside = [s for s in stalls if t0 <= s.when < t1]
        total = sum(s.ms for s in inside)
        gc_ms = sum(min(s.gc_ms, s.ms) for s in inside)
        longest = max(inside, key=lambda s: s.ms, default=None)
        print(f"{name} ({t1 - t0:.0f} s)" if t1 != float("inf") else name)
        print(f"  {len(inside)} stalls, {total / 1000:.1f} s logged, of which GC "
              f"{gc_ms / 1000:.1f} s ({sum(s.full_gcs for s in inside)} full collections, "
              f"{sum(s.full_gc_ms for s in inside) / 1000:.1f} s); longest "
              + (f"{longest.ms} ms ({longest.broker})" if longest else "-"))
        by_broker: dict[str, int] = defaultdict(int)
        for s in inside:
            by_broker[s.broker] += s.ms
        print("  per broker: " + ", ".join(f"{b} {ms / 1000:.1f} s"
                                            for b, ms in sorted(by_broker.items())))
        for place, ms in sorted(rank(inside, args.inclusive).items(),
                                key=lambda x: -x[1])[:args.top]:
            print(f"  {ms / 1000:7.2f} s {100 * ms / total:5.1f} %  {place}")


if __name__ == "__main__":
    main()
