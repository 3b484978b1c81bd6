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


def locust_command() -> list[str]:
    locust = shutil.which("locust")
    return [locust] if locust else [sys.executable, "-m", "locust"]


# locust's own --host names the brokers (as locust-plugins' Kafka user takes them);
# --kafka-bootstrap is its alias
@pytest.mark.parametrize("bootstrap_option", ["--host", "--kafka-bootstrap"])
def test_headless_locust_run_has_no_failures(broker_factory: BrokerFactory, tmp_path: Path,
                                             bootstrap_option: str) -> None:
    broker = broker_factory()
    prefix = tmp_path / "run"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [*locust_command(), "-f", str(LOCUSTFILE), "--headless", "-u", "2", "-r", "2",
         "--run-time", "4s", "--stop-timeout", "5", "--only-summary", "--csv", str(prefix),
         bootstrap_option, broker.bootstrap, "--kafka-topic", "locust-test",
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


def test_host_and_alias_that_disagree_are_refused(tmp_path: Path) -> None:
    """Two different broker lists: refused before any user starts, in one line (no run
    against whichever one would have won)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [*locust_command(), "-f", str(LOCUSTFILE), "--headless", "-u", "1", "--run-time", "2s",
         "--host", "127.0.0.1:1", "--kafka-bootstrap", "127.0.0.1:2"],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "--host 127.0.0.1:1 and --kafka-bootstrap 127.0.0.1:2 disagree" in proc.stderr, \
        proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
