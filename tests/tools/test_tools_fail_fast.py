"""Tools that fail fast and say why (issue 27), each run as a newcomer runs it: the real
`pybroker` tool in a subprocess against a real broker, its real output checked.

* a wrong SASL password ends the command at once, the authentication failure first
  (it waited the 30 s timeout before, and then blamed reachability);
* a broker that accepts connections but does not answer still gets the timeout;
* `--bootstrap-server` may be left out: bootstrap.servers of the client properties, else
  $PYBROKER_BOOTSTRAP_SERVER, else localhost:9092; a server without a port is refused;
* Ctrl-C in console-producer exits 130 and says what was sent and acknowledged;
* `transactions describe` right after a start retries COORDINATOR_LOAD_IN_PROGRESS;
* `topics --describe | head -1` ends quietly."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pybroker.tools import _bootstrap

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

#: bound on a run that must not wait for the brokers: an interpreter start and a
#: refused login on a loaded machine, well under the 30 s default timeout it waited
FAST_BOUND_S = 15.0
#: bound on a run against a live broker (a metadata wait, a coordinator load)
RUN_TIMEOUT_S = 90.0
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')


def pybroker(*args: str, env: dict[str, str] | None = None, stdin: str | None = None,
             timeout: float = RUN_TIMEOUT_S) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pybroker", *args], input=stdin,
                            capture_output=True, text=True, timeout=timeout,
                            stdin=None if stdin is not None else subprocess.DEVNULL,
                            env=env if env is not None else tool_env())
    return result, time.monotonic() - start


def tool_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != _bootstrap.ENV}
    env.update(extra)
    return env


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def client_properties(path: Path, port: int, password: str) -> Path:
    path.write_text(
        f"bootstrap.servers=127.0.0.1:{port}\nsecurity.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain."
        f'PlainLoginModule required username="alice" password="{password}";\n')
    return path


@pytest.fixture
def sasl_broker(broker_factory: BrokerFactory) -> Broker:
    broker = broker_factory(start=False)
    broker.overrides.update({
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{broker.port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    return broker.start()


@pytest.mark.parametrize("tool", [
    ["topics", "--list"],
    ["console-consumer", "--topic", "t", "--max-messages", "1"],
    ["console-producer", "--topic", "t"],
    ["consumer-groups", "--list"],
])
def test_a_wrong_password_ends_the_tool_at_once(sasl_broker: Broker, tmp_path: Path,
                                                tool: list[str]) -> None:
    bad = client_properties(tmp_path / "bad.properties", sasl_broker.port, "wrong")
    result, elapsed = pybroker(*tool, "--command-config", str(bad), stdin="one\n")
    line = one_line(result)
    assert result.returncode == 1, result.stderr
    assert "authentication failed" in line, line
    assert "Invalid username or password" in line, line
    assert "no broker reachable" not in line, line
    assert elapsed < FAST_BOUND_S, (elapsed, line)


def test_the_right_password_works_with_the_bootstrap_of_the_command_config(
        sasl_broker: Broker, tmp_path: Path) -> None:
    good = client_properties(tmp_path / "alice.properties", sasl_broker.port, "alice-secret")
    created, _ = pybroker("topics", "--command-config", str(good), "--create", "--topic",
                          "secured")
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "Created topic secured."


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a broker stuck starting)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def test_a_broker_that_accepts_but_does_not_answer_gets_the_timeout(
        silent_port: int, tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("default.api.timeout.ms=3000\n")
    result, elapsed = pybroker("topics", "--bootstrap-server", f"127.0.0.1:{silent_port}",
                               "--list", "--command-config", str(config))
    assert result.returncode == 1, result.stderr
    assert "within 3000 ms" in result.stderr, result.stderr
    assert elapsed >= 3.0, elapsed


def test_a_bootstrap_server_without_a_port_is_refused() -> None:
    result, elapsed = pybroker("topics", "--bootstrap-server", "127.0.0.1", "--list")
    line = one_line(result)
    assert result.returncode == 1
    assert "invalid bootstrap server '127.0.0.1'" in line and "port is required" in line, line
    assert elapsed < FAST_BOUND_S


def test_the_bootstrap_server_comes_from_the_environment(broker: Broker) -> None:
    result, _ = pybroker("topics", "--list", env=tool_env(**{_bootstrap.ENV: broker.bootstrap}))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_without_any_bootstrap_the_tool_tries_localhost_9092() -> None:
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 9092)) == 0:
            pytest.skip("something listens on 9092 here")
    result, elapsed = pybroker("topics", "--list")
    line = one_line(result)
    assert result.returncode == 1
    assert line.startswith("pybroker topics: cannot connect to localhost:9092: "), line
    assert "Connection refused" in line, line
    assert elapsed < FAST_BOUND_S


def test_ctrl_c_in_console_producer_exits_130_with_the_counts(broker: Broker,
                                                               topic_name: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "console-producer", "--bootstrap-server",
         broker.bootstrap, "--topic", topic_name], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=tool_env())
    assert proc.stdin is not None
    proc.stdin.write("a\nb\nc\n")
    proc.stdin.flush()
    # the three records are in the log: acknowledged by the broker
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        offsets, _ = pybroker("get-offsets", "--bootstrap-server", broker.bootstrap,
                              "--topic", topic_name)
        if offsets.stdout.strip() == f"{topic_name}:0:3":
            break
        assert time.monotonic() < deadline, offsets.stdout + offsets.stderr
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    proc.stdin.close()
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert "Interrupted: 3 records sent, 3 acknowledged, 0 failed" in err, err


def test_transactions_describe_right_after_a_start_waits_for_the_coordinator(
        broker_factory: BrokerFactory) -> None:
    # a fresh broker: the first FindCoordinator creates __transaction_state, whose
    # partitions then load (COORDINATOR_LOAD_IN_PROGRESS), which the tool retries
    fresh = broker_factory()
    result, _ = pybroker("transactions", "--bootstrap-server", fresh.bootstrap, "describe",
                         "--transactional-id", "nobody")
    assert result.returncode == 1
    line = one_line(result)
    assert "COORDINATOR_LOAD_IN_PROGRESS" not in line, line
    assert "COORDINATOR_NOT_AVAILABLE" not in line, line
    assert line == "Error: describing nobody failed: TRANSACTIONAL_ID_NOT_FOUND", line


@pytest.mark.parametrize("tool", [["topics", "--describe"], ["topics", "--list"],
                                  ["configs", "--entity-type", "topics", "--describe"]])
def test_describe_piped_to_head_ends_quietly(broker: Broker, topic_name: str,
                                            tool: list[str]) -> None:
    created, _ = pybroker("topics", "--bootstrap-server", broker.bootstrap, "--create",
                          "--topic", topic_name, "--partitions", "3", "--if-not-exists")
    assert created.returncode == 0, created.stderr
    # `head -n 0` exits before the tool writes (as `head -3` does once it has its lines):
    # every write then meets a closed pipe
    result = subprocess.run(
        f"{sys.executable} -m pybroker {' '.join(tool)} --bootstrap-server "
        f"{broker.bootstrap} | head -n 0; exit ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True,
        timeout=RUN_TIMEOUT_S, env=tool_env())
    assert result.stderr == "", result.stderr
    assert result.returncode == 0


def test_cluster_info_and_broker_api_versions(broker: Broker) -> None:
    info, _ = pybroker("cluster", "--bootstrap-server", broker.bootstrap, "info")
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert lines[0].startswith("Cluster ID: ") and len(lines[0]) > len("Cluster ID: ")
    assert lines[1:] == ["Controller: 0", "Brokers: 1", f"  0 {broker.bootstrap} rack: null"]
    versions, _ = pybroker("broker-api-versions", "--bootstrap-server", broker.bootstrap)
    assert versions.returncode == 0, versions.stderr
    lines = versions.stdout.splitlines()
    assert lines[0] == f"{broker.bootstrap} (id: 0 rack: null) -> (", lines[0]
    assert lines[-1] == ")"
    assert re.fullmatch(r"\tProduce\(0\): \d+ to \d+ \[usable: \d+\],", lines[1]), lines[1]
    assert any(line.startswith("\tApiVersions(18): 0 to ") for line in lines), lines


def test_cluster_info_waits_for_brokers_still_starting(broker_factory: BrokerFactory) -> None:
    later = broker_factory(start=False)
    waiter = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "cluster", "--bootstrap-server", later.bootstrap,
         "info", "--wait-for-brokers", "1", "--timeout", "90000"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=tool_env())
    later.start()  # after the waiter found nothing listening
    out, err = waiter.communicate(timeout=RUN_TIMEOUT_S)
    assert waiter.returncode == 0, err
    assert "Brokers: 1" in out.splitlines(), out
