"""`pybroker load-test`: the packaged locustfile, run by the CLI, headless for a few
seconds against a live broker: produce and fetch requests without failures in locust's
stats, and the records on the broker."""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.conftest import BrokerFactory

# only look for it: importing locust would monkey-patch this interpreter with gevent
if importlib.util.find_spec("locust") is None:
    pytest.skip("locust is not installed", allow_module_level=True)

TOPIC = "load-test-topic"
PARTITIONS = 2
BATCH = 20
RECORD_SIZE = 64


def test_load_test_headless_produces_and_consumes(broker_factory: BrokerFactory,
                                                  tmp_path: Path) -> None:
    broker = broker_factory()
    prefix = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "pybroker", "load-test", "--headless", "-u", "2", "-r", "2",
         "-t", "6s", "--host", broker.bootstrap, "--topic", TOPIC,
         "--partitions", str(PARTITIONS), "--batch", str(BATCH),
         "--record-size", str(RECORD_SIZE),
         "--", "--stop-timeout", "5", "--csv", str(prefix)],
        capture_output=True, text=True, timeout=90, cwd=tmp_path, stdin=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    # locust's printed stats: both request types, no failures
    lines = {line.split()[0] + " " + line.split()[1]: line for line in out.splitlines()
             if line.startswith(("produce ", "fetch ")) and "%) |" in line}
    assert f"produce {TOPIC}" in lines and f"fetch {TOPIC}" in lines, out[-3000:]
    with open(f"{prefix}_stats.csv", newline="") as f:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    produce = rows[("produce", f"{TOPIC} x{BATCH}")]
    fetch = rows[("fetch", TOPIC)]
    for row in (produce, fetch, rows[("", "Aggregated")]):
        assert int(row["Failure Count"]) == 0, row
    assert int(produce["Request Count"]) > 0
    assert int(fetch["Request Count"]) > 0
    assert float(produce["Average Content Size"]) == BATCH * RECORD_SIZE
    # the records landed: at least every acknowledged batch is in the log
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "load-test-check"})
    try:
        landed = sum(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                     for p in range(PARTITIONS))
    finally:
        consumer.close()
    assert landed >= int(produce["Request Count"]) * BATCH


def test_load_test_without_a_broker_fails_fast(tmp_path: Path) -> None:
    """Nothing listens at --host: one line and exit 1, before locust starts."""
    proc = subprocess.run(
        [sys.executable, "-m", "pybroker", "load-test", "--headless", "-t", "2s",
         "--host", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("pybroker load-test: cannot connect to 127.0.0.1:1"), \
        proc.stderr
