"""bench/report.py: benchmark JSON -> Markdown table and PNG chart."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_report", BENCH / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample() -> dict[str, object]:
    side = {"ok_runs": 1, "runs": [{"error": None}],
            "median": {"records_per_s": 1000.0, "mb_per_s": 0.1, "cpu_s_per_gb": 2.0,
                       "peak_rss_mb": 30.0}}
    case = {"op": "produce", "record_size": 100, "partitions": 1, "records": 1000,
            "sides": {"pybroker": side, "kafka": {**side, "median": {
                **side["median"], "records_per_s": 500.0}}},
            "ratio": {"records_per_s": 2.0, "mb_per_s": 2.0, "cpu_s_per_gb": 1.0,
                      "peak_rss_mb": 1.0}}
    return {"meta": {"date": "2026-01-01", "command": "x", "scale": 1, "repeat": 1,
                     "labels": ["pybroker", "kafka"],
                     "machine": {"nproc": 2, "cpu_model": "cpu", "mem_total_gb": 4,
                                 "kernel": "6", "python": "3.11", "confluent_kafka": "2",
                                 "librdkafka": "2"},
                     "sides": [{"kind": "external", "label": "kafka",
                                "address": "h:9092"}]},
            "cases": [case, {**case, "op": "consume"}]}


def test_markdown_table() -> None:
    text = load_report().render(sample())
    assert "| records/s | 1,000 | 500 | 2.00x |" in text


def test_png_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = tmp_path / "run.json"
    data.write_text(json.dumps(sample()))
    png = tmp_path / "chart.png"
    out = tmp_path / "out.md"
    assert load_report().main([str(data), "--png", str(png), "--update", str(out)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "records/s" in out.read_text()


def test_client_cpu_row_falls_back_to_per_run_seconds() -> None:
    data = sample()
    case = data["cases"][0]  # type: ignore[index]
    for side in case["sides"].values():
        side["runs"] = [{"error": None, "client_cpu_s": 0.5}, {"error": None, "client_cpu_s": 0.3}]
    # 1000 records x 100 B = 0.0001 GB -> median 0.4 s / 0.0001 GB
    assert "| client CPU s/GB | 4,000.00 | 4,000.00 | n/a |" in load_report().render(data)
