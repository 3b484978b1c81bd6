"""bench/floor.py: the kernel-only cost of a broker's data path, measured for real."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_floor_measures_every_case_and_cleans_up(tmp_path: Path) -> None:
    out = tmp_path / "floor.json"
    # its own interpreter: the locust tests' gevent patches this one's sockets
    subprocess.run([sys.executable, str(BENCH / "floor.py"), "--gb", "0.02", "--dir",
                    str(tmp_path), "--json", str(out)], check=True, timeout=60)
    doc = json.loads(out.read_text())
    cases = [r["case"] for r in doc["results"]]
    assert len(cases) == 6 and len(set(cases)) == 6
    assert any("sendfile" in c for c in cases) and any("receive+write" in c for c in cases)
    for r in doc["results"]:
        assert r["bytes"] == 19 * (1 << 20)  # 0.02 GB in whole MiB chunks
        assert r["mb_per_s"] > 0 and r["cpu_s_per_gb"] >= 0
    assert doc["meta"]["machine"]["nproc"] >= 1
    # its scratch files live in a temp dir under --dir that is gone afterwards
    assert [p.name for p in tmp_path.iterdir()] == ["floor.json"]
    text = load("report").render_any(doc)
    assert "| loopback sendfile, SO_SNDBUF Kafka's 102400 |" in text
