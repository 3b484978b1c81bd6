"""Every tool pointed at a broker that is not there (issue 11, defect 7; issue 27): a
connection refused on every bootstrap address ends it at once -- not after its 30 s
timeout, which cannot help -- with one clear line on stderr naming the address and the
reason, a non-zero exit, no traceback and no librdkafka `%3|...|FAIL|` line.

They run a few at a time (each is an interpreter start: more at once would measure
the machine's load, not the tool), in one module fixture, and each test checks one."""

from __future__ import annotations

import concurrent.futures
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

#: bound on a tool's whole run: an interpreter start and one refused connect, on a
#: loaded machine; well under the 30 s the tools waited before (their default timeout)
RUN_BOUND_S = 15.0
#: runs whose timeout was set to 2 s: refused is refused, whatever the timeout
SHORT_RUN_BOUND_S = RUN_BOUND_S
PARALLEL_RUNS = 3


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Run:
    returncode: int
    elapsed_s: float
    stdout: str
    stderr: str


def cases(bootstrap: str, command_config: Path) -> dict[str, tuple[list[str], float]]:
    """id -> (tool arguments, bound on the run time)."""
    b = ["--bootstrap-server", bootstrap]
    perf = ["--topic", "t", "--num-records", "20", "--record-size", "10", "--throughput", "-1"]
    return {
        "topics-list": (["topics", *b, "--list"], RUN_BOUND_S),
        "topics-create": (["topics", *b, "--create", "--topic", "t"], RUN_BOUND_S),
        "topics-describe": (["topics", *b, "--describe", "--topic", "t"], RUN_BOUND_S),
        "console-producer": (["console-producer", *b, "--topic", "t"], RUN_BOUND_S),
        "console-consumer": (["console-consumer", *b, "--topic", "t"], RUN_BOUND_S),
        "console-consumer-group": (["console-consumer", *b, "--topic", "t", "--group", "g"],
                                   RUN_BOUND_S),
        "consumer-groups-list": (["consumer-groups", *b, "--list"], RUN_BOUND_S),
        "consumer-groups-describe": (["consumer-groups", *b, "--describe", "--group", "g"],
                                     RUN_BOUND_S),
        "producer-perf-test": (["producer-perf-test", *b, *perf], RUN_BOUND_S),
        "consumer-perf-test": (["consumer-perf-test", *b, "--topic", "t", "--messages", "5"],
                               RUN_BOUND_S),
        "consumer-perf-test-group": (["consumer-perf-test", *b, "--topic", "t",
                                      "--messages", "5", "--group", "g"], RUN_BOUND_S),
        # with the timeouts the tools take, as Kafka's do
        "topics-command-config": (["topics", *b, "--list", "--command-config",
                                   str(command_config)], SHORT_RUN_BOUND_S),
        "consumer-groups-timeout": (["consumer-groups", *b, "--list", "--timeout", "2000"],
                                    SHORT_RUN_BOUND_S),
        "console-producer-delivery-timeout": (
            ["console-producer", *b, "--topic", "t", "--producer-property",
             "delivery.timeout.ms=2000"], SHORT_RUN_BOUND_S),
        "console-consumer-config": (["console-consumer", *b, "--topic", "t",
                                     "--consumer-property", "default.api.timeout.ms=2000"],
                                    SHORT_RUN_BOUND_S),
        # issue 15's describe and configure tools
        "configs-describe": (["configs", *b, "--entity-type", "topics", "--describe"],
                             RUN_BOUND_S),
        "configs-alter-brokers": (["configs", *b, "--entity-type", "brokers",
                                   "--entity-default", "--alter", "--add-config",
                                   "log.retention.ms=1"], RUN_BOUND_S),
        "log-dirs": (["log-dirs", *b, "--describe"], RUN_BOUND_S),
        "get-offsets": (["get-offsets", *b, "--topic", "t"], RUN_BOUND_S),
        "delete-records": (["delete-records", *b, "--offset-json-file",
                            str(command_config.with_name("offsets.json"))], RUN_BOUND_S),
        # tools on pybroker's own protocol client
        "transactions-list": (["transactions", *b, "list"], RUN_BOUND_S),
        "reassign-partitions-list": (["reassign-partitions", *b, "--list"], RUN_BOUND_S),
        "leader-election": (["leader-election", *b, "--election-type", "PREFERRED",
                             "--all-topic-partitions"], RUN_BOUND_S),
        "acls-list": (["acls", *b, "--list"], RUN_BOUND_S),
    }


def run_tool(args: list[str]) -> Run:
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "pybroker", *args], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        # one record for the producers; stdin then closes, as at the end of a pipe
        out, err = proc.communicate("one line\n", timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return Run(proc.returncode, time.monotonic() - start, out, err)


@pytest.fixture(scope="module")
def unreachable(tmp_path_factory: pytest.TempPathFactory) -> tuple[
        str, dict[str, Run], dict[str, float]]:
    bootstrap = f"127.0.0.1:{closed_port()}"
    command_config = tmp_path_factory.mktemp("tools") / "admin.properties"
    command_config.write_text("default.api.timeout.ms=2000\n")
    command_config.with_name("offsets.json").write_text(
        '{"partitions": [{"topic": "t", "partition": 0, "offset": 1}], "version": 1}')
    todo = cases(bootstrap, command_config)
    with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        futures = {name: pool.submit(run_tool, args) for name, (args, _) in todo.items()}
        runs = {name: future.result() for name, future in futures.items()}
    return bootstrap, runs, {name: bound for name, (_, bound) in todo.items()}


def summary(run: Run) -> str:
    """A failing run in a few lines (a flood of client lines would bury the report)."""
    lines = run.stderr.splitlines()
    return (f"exit {run.returncode} after {run.elapsed_s:.1f} s, {len(lines)} stderr lines:\n"
            + "\n".join(line[:200] for line in lines[:3] + ["..."] + lines[-3:]))


@pytest.mark.parametrize("name", list(cases("h:1", Path("p"))))
def test_tool_gives_up_in_one_line(
        unreachable: tuple[str, dict[str, Run], dict[str, float]], name: str) -> None:
    bootstrap, runs, bounds = unreachable
    run = runs[name]
    assert run.returncode == 1, summary(run)
    assert run.elapsed_s < bounds[name], summary(run)
    assert "Traceback" not in run.stderr, summary(run)
    assert "%3|" not in run.stderr and "|FAIL|" not in run.stderr, summary(run)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, summary(run)
    # the line says which broker could not be reached, and why
    assert bootstrap in lines[0], lines[0]
    assert "Connection refused" in lines[0], lines[0]
