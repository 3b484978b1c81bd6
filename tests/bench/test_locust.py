"""A short headless locust run of bench/locustfile.py against a live broker."""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BrokerFactory

# only look for it: importing locust monkey-patches this interpreter with gevent, and
# later in-process tests (kazoo's threads, anyio) would then run on gevent's hub and hang
if importlib.util.find_spec("locust") is None:
    pytest.skip("locust is not installed", allow_module_level=True)

LOCUSTFILE = Path(__file__).resolve().parents[2] / "bench" / "locustfile.py"


def test_headless_locust_run_has_no_failures(broker_factory: BrokerFactory,
                                             tmp_path: Path) -> None:
    broker = broker_factory()
    locust = shutil.which("locust")
    command = [locust] if locust else [sys.executable, "-m", "locust"]
    prefix = tmp_path / "run"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [*command, "-f", str(LOCUSTFILE), "--headless", "-u", "2", "-r", "2",
         "--run-time", "4s", "--stop-timeout", "5", "--only-summary", "--csv", str(prefix),
         "--kafka-bootstrap", broker.bootstrap, "--kafka-topic", "locust-test",
         "--kafka-partitions", "2", "--batch", "50", "--record-size", "200", "--keys", "8",
         "ProducerUser", "ConsumerUser"],
        capture_output=True, text=True, timeout=90, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(f"{prefix}_stats.csv", newline="") as f:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    produce = rows[("produce", "locust-test x50")]
    fetch = rows[("fetch", "locust-test")]
    aggregated = rows[("", "Aggregated")]
    for row in (produce, fetch, aggregated):
        assert int(row["Failure Count"]) == 0
    assert int(produce["Request Count"]) > 0
    assert int(fetch["Request Count"]) > 0
    # percentile columns are whole milliseconds (a fast broker rounds to 0); the average is not
    assert float(produce["Average Response Time"]) > 0
    assert float(produce["Average Content Size"]) == 50 * 200
    with open(f"{prefix}_failures.csv", newline="") as f:
        assert list(csv.DictReader(f)) == []
