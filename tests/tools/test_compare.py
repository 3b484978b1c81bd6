"""`pybroker compare` against two live pybroker brokers (one standing in for the stock
Kafka peer): both sides' figures, and the ratios, in the table and in --json."""

from __future__ import annotations

import json
import subprocess
import sys

from confluent_kafka.admin import AdminClient

from pybroker.tools._load import workload
from tests.conftest import BrokerFactory

RECORDS = 500


def compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", "compare", *args],
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_compare_json_has_both_sides_and_the_ratios(broker_factory: BrokerFactory) -> None:
    target, peer = broker_factory(), broker_factory()
    assert target.proc is not None and peer.proc is not None
    result = compare("--bootstrap-server", target.bootstrap, "--pid", str(target.proc.pid),
                     "--peer", peer.bootstrap, "--peer-pid", str(peer.proc.pid),
                     "--records", str(RECORDS), "--sizes", "100", "--partitions", "1,2",
                     "--acks", "all", "--e2e-records", "20", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)  # nothing but the JSON on stdout
    assert "100 B x 2p rep 1 peer     consume" in result.stderr  # the progress
    assert out["pybroker"] == {"bootstrap": target.bootstrap, "pid": target.proc.pid}
    assert out["peer"] == {"bootstrap": peer.bootstrap, "pid": peer.proc.pid}
    assert [(c["op"], c["partitions"]) for c in out["cases"]] == [
        ("produce", 1), ("consume", 1), ("end-to-end", 1),
        ("produce", 2), ("consume", 2), ("end-to-end", 2)]
    for case in out["cases"]:
        assert case["record_size"] == 100
        assert case["records"] == (20 if case["op"] == "end-to-end" else RECORDS)
        for side in ("pybroker", "peer"):
            figures = case[side]
            assert figures["runs"] == 1
            assert figures["records_per_s"] > 0
            assert abs(figures["mb_per_s"] - figures["records_per_s"] * 100 / 1e6) < 1e-6
            assert figures["peak_rss_mb"] > 1  # a PID was given: its RSS
            assert figures["cpu_s_per_gb"] is not None
            if case["op"] in ("produce", "end-to-end"):
                assert 0 < figures["latency_p50_ms"] <= figures["latency_p99_ms"]
            else:
                assert figures["latency_p50_ms"] is None
        ratio = case["ratio"]["records_per_s"]
        assert ratio == case["pybroker"]["records_per_s"] / case["peer"]["records_per_s"]
    # the records went to both brokers, and the comparison's topics are gone again
    for broker in (target, peer):
        topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(
            timeout=10).topics
        assert not [t for t in topics if t.startswith("pybroker-compare-")], topics


def test_compare_table(broker_factory: BrokerFactory) -> None:
    target, peer = broker_factory(), broker_factory()
    result = compare("--bootstrap-server", target.bootstrap, "--peer", peer.bootstrap,
                     "--records", str(RECORDS), "--sizes", "200", "--partitions", "1",
                     "--e2e-records", "0")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (f"pybroker {target.bootstrap} vs peer {peer.bootstrap}: "
                        f"{RECORDS} records per phase, acks=1, repeat 1")
    head = lines.index(f"produce 200 B records, 1 partition, {RECORDS} records")
    assert lines[head + 1] == "  (latency: produce to ack, every record)"
    assert lines[head + 2].split() == ["pybroker", "peer", "ratio"]
    rows = {line[:16].strip(): line[16:].split() for line in lines[head + 3:head + 8]}
    assert list(rows) == ["records/s", "MB/s", "latency p50 ms", "latency p99 ms",
                          "latency p99.9"]
    for values in rows.values():
        assert len(values) == 3 and values[2].endswith("x")
    # no PIDs given: each broker is found by its port, this machine's process on it
    assert target.proc is not None and peer.proc is not None
    assert workload.listener_pid(target.bootstrap) == target.proc.pid
    assert workload.listener_pid(peer.bootstrap) == peer.proc.pid
    for label in ("CPU s/GB", "peak RSS MB"):
        row = next(line for line in lines[head:] if line.startswith(f"  {label}"))
        ours, theirs = row[len(f"  {label}"):].split()[:2]
        # measured on both sides (a ratio of two CPU times that round to 0.00 on so
        # small a run is n/a: only the values show the PIDs were found)
        assert ours != "n/a" and theirs != "n/a", row
    assert f"consume 200 B records, 1 partition, {RECORDS} records" in lines
    assert not [line for line in lines if line.startswith("end-to-end")]  # --e2e-records 0


def test_compare_with_no_peer_listening_fails_fast(broker_factory: BrokerFactory) -> None:
    target = broker_factory()
    result = compare("--bootstrap-server", target.bootstrap, "--peer", "127.0.0.1:1")
    assert result.returncode == 1
    assert result.stderr.startswith("pybroker compare: cannot connect to 127.0.0.1:1"), \
        result.stderr
