"""From the wheel alone, in a fresh virtualenv with the `[load]` extra: `pybroker serve`,
`pybroker load-test` (the locustfile the wheel carries) and `pybroker compare` (a second
pybroker standing in for the stock Kafka peer). Run by `ci/wheels --test`, which names
the wheel in PYBROKER_WHEEL; tiny record counts and a short run time (about a minute,
most of it the install)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

INSTALL_TIMEOUT_S = 600
START_TIMEOUT_S = 60
RUN_TIMEOUT_S = 120

pytestmark = [
    pytest.mark.skipif(not os.environ.get("PYBROKER_WHEEL"),
                       reason="needs a built wheel: run by ci/wheels --test (PYBROKER_WHEEL)"),
    # the virtualenv's install (the module fixture, counted in the first test's setup),
    # two broker starts, load-test and compare: not the suite's default 120 s, which a
    # loaded machine's install alone went over
    pytest.mark.timeout(INSTALL_TIMEOUT_S + 2 * START_TIMEOUT_S + 2 * RUN_TIMEOUT_S),
]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv holding the wheel with its [load] extra, nothing else."""
    wheel = Path(os.environ["PYBROKER_WHEEL"]).resolve()
    root = tmp_path_factory.mktemp("wheel-load") / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_ONLY_BINARY"] = ":all:"
    done = subprocess.run([str(root / "bin" / "pip"), "install", "--quiet", f"{wheel}[load]"],
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root


def pybroker(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(venv / "bin" / "pybroker"), *args], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def brokers(venv: Path, tmp_path: Path) -> Iterator[list[tuple[str, int]]]:
    """Two `pybroker serve` of the wheel's venv: (bootstrap, pid) each."""
    procs: list[subprocess.Popen[bytes]] = []
    started: list[tuple[str, int]] = []
    try:
        for i in range(2):
            port = free_port()
            log = open(tmp_path / f"broker{i}.log", "wb")  # noqa: SIM115 - the broker's
            procs.append(subprocess.Popen(
                [str(venv / "bin" / "pybroker"), "serve",
                 "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                 "--override", f"log.dirs={tmp_path / f'data{i}'}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=tmp_path))
            log.close()
            started.append((f"127.0.0.1:{port}", procs[-1].pid))
        for (bootstrap, _pid), proc in zip(started, procs, strict=True):
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                assert proc.poll() is None, (tmp_path / "broker0.log").read_text()[-3000:]
                try:
                    socket.create_connection(("127.0.0.1", int(bootstrap.split(":")[1])),
                                             timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, f"{bootstrap} did not listen"
                    time.sleep(0.2)
        yield started
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)


def test_load_test_and_compare_from_the_wheel(venv: Path, brokers: list[tuple[str, int]],
                                              tmp_path: Path) -> None:
    (target, target_pid), (peer, peer_pid) = brokers
    # the locustfile is the wheel's own, not a clone's
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "from pybroker.tools.load_test import LOCUSTFILE as f; "
                            "print(f, f.is_file())"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    path, exists = where.stdout.split()
    assert exists == "True" and Path(path).is_relative_to(venv), where.stdout + where.stderr

    load = pybroker(venv, "load-test", "--headless", "-u", "2", "-r", "2", "-t", "5s",
                    "--host", target, "--topic", "wheel-load", "--batch", "20",
                    "--", "--stop-timeout", "5", cwd=tmp_path)
    out = load.stdout + load.stderr
    assert load.returncode == 0, out[-3000:]
    # locust's request-stats rows (not its percentile rows): Type Name # reqs # fails(%) |
    stats = {line.split()[0]: line.split() for line in out.splitlines()
             if line.startswith(("produce ", "fetch ")) and "%) |" in line}
    for kind in ("produce", "fetch"):
        row = stats[kind]
        reqs = row[3] if kind == "produce" else row[2]
        fails = row[4] if kind == "produce" else row[3]
        assert int(reqs) > 0 and fails.startswith("0("), (kind, row)

    compare = pybroker(venv, "compare", "--bootstrap-server", target, "--pid", str(target_pid),
                       "--peer", peer, "--peer-pid", str(peer_pid), "--records", "300",
                       "--sizes", "100", "--partitions", "1", "--e2e-records", "20", "--json",
                       cwd=tmp_path)
    assert compare.returncode == 0, compare.stderr[-3000:]
    result = json.loads(compare.stdout)
    assert [c["op"] for c in result["cases"]] == ["produce", "consume", "end-to-end"]
    for case in result["cases"]:
        for side in ("pybroker", "peer"):
            assert case[side]["records_per_s"] > 0 and case[side]["peak_rss_mb"] > 1
        assert case["ratio"]["records_per_s"] > 0
