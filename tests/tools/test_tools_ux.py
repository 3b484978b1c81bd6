"""The tools as a newcomer meets them (issue 17): `pybroker --version`, Kafka's
dry-run warning only where Kafka prints it, dump-log-segments in a pipe and on a file
that is not a segment, a console consumer on a missing topic, librdkafka's own lines
only with --verbose, and one line (never a traceback) for any failure."""

from __future__ import annotations

import argparse
import io
import logging
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from confluent_kafka import Producer

import pybroker
from pybroker import cli
from pybroker.tools import _common
from pybroker.tools import dump_log_segments as dump_tool

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS)]
from conftest import Broker  # noqa: E402

ROOT = TESTS.parent
#: bound on one tool run against a live broker (a group join, a metadata wait)
TOOL_TIMEOUT_S = 60
DRY_RUN_WARNING = "No action will be performed as the --execute option is missing"
#: librdkafka's own log line (its format when it prints one itself) or our logger's
#: rendering of one (`... FAIL [rdkafka#...] ...`)
CLIENT_LINE = re.compile(r"^%\d\||\[rdkafka#", re.MULTILINE)


def pybroker_run(*args: str, stdin: str | None = None,
                 timeout: float = TOOL_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- --version -------------------------------------------------------------------------


def cargo_version() -> str:
    """The Cargo workspace's version: the one place it is kept."""
    text = (ROOT / "Cargo.toml").read_text()
    section = text[text.index("[workspace.package]"):]
    found = re.search(r'^version = "([^"]+)"', section, re.MULTILINE)
    assert found, "no version in Cargo.toml's [workspace.package]"
    return found.group(1)


def test_version_is_the_cargo_workspaces() -> None:
    result = pybroker_run("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"pybroker {cargo_version()}\n"
    # Kafka's scripts take --version too
    for command in ("topics", "console-consumer", "dump-log-segments"):
        assert pybroker_run(command, "--version").stdout == result.stdout
    assert pybroker.__version__ == version("pybroker") == cargo_version()
    assert "version" not in re.findall(r"^(\w+) =", (ROOT / "pyproject.toml").read_text(),
                                       re.MULTILINE)


# -- consumer-groups --reset-offsets ---------------------------------------------------


@pytest.fixture(scope="module")
def group_with_offsets(broker: Broker) -> Iterator[tuple[str, str]]:
    topic, group = "ux-reset", "ux-reset-group"
    created = pybroker_run("topics", "--bootstrap-server", broker.bootstrap, "--create",
                           "--topic", topic, "--partitions", "1")
    assert created.returncode == 0, created.stderr
    produced = pybroker_run("console-producer", "--bootstrap-server", broker.bootstrap,
                            "--topic", topic, stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = pybroker_run("console-consumer", "--bootstrap-server", broker.bootstrap,
                            "--topic", topic, "--group", group, "--from-beginning",
                            "--max-messages", "2")
    assert consumed.returncode == 0, consumed.stderr
    yield topic, group


def reset(broker: Broker, topic: str, group: str, *mode: str) -> subprocess.CompletedProcess[str]:
    result = pybroker_run("consumer-groups", "--bootstrap-server", broker.bootstrap,
                          "--reset-offsets", "--group", group, "--topic", topic,
                          "--to-earliest", *mode)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("mode", ["--dry-run", "--execute"])
def test_reset_offsets_with_a_mode_prints_no_warning(broker: Broker, mode: str,
                                                     group_with_offsets: tuple[str, str]) -> None:
    result = reset(broker, *group_with_offsets, mode)
    assert DRY_RUN_WARNING not in result.stdout + result.stderr
    assert result.stdout.split()[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]


def test_reset_offsets_without_a_mode_warns_on_stderr(
        broker: Broker, group_with_offsets: tuple[str, str]) -> None:
    result = reset(broker, *group_with_offsets)
    assert DRY_RUN_WARNING in result.stderr
    assert DRY_RUN_WARNING not in result.stdout
    assert result.stdout.split()[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]


# -- dump-log-segments ------------------------------------------------------------------


def first_batch(broker: Broker) -> bytes:
    """One record batch as the broker wrote it to disk (a fresh topic's first segment)."""
    topic = "ux-dump"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"x" * 100)
    assert producer.flush(30) == 0
    segment = broker.data_dir / f"{topic}-0" / ("0" * 20 + ".log")
    raw = segment.read_bytes()
    size = int.from_bytes(raw[8:12], "big") + 12
    assert len(raw) >= size
    return raw[:size]


def test_dump_piped_to_head_exits_quietly(broker: Broker, tmp_path: Path) -> None:
    # far more output than a pipe holds, so the tool is still writing when head leaves
    segment = tmp_path / ("0" * 20 + ".log")
    segment.write_bytes(first_batch(broker) * 5000)
    result = subprocess.run(
        f"{sys.executable} -m pybroker dump-log-segments --files {segment} | head -n 3",
        shell=True, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
        stdin=subprocess.DEVNULL, executable="/bin/bash")
    assert result.stdout.splitlines()[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    assert result.stderr == ""


@pytest.mark.parametrize("name", ["demo.log", "42.index", "0000000000000000000x.timeindex"])
def test_dump_of_a_file_not_named_by_its_offset_is_one_line(tmp_path: Path,
                                                             name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"")
    parser = argparse.ArgumentParser()
    dump_tool.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    assert dump_tool.run(parser.parse_args(["--files", str(path)]), out, err) == 1
    assert err.getvalue().splitlines() == [
        f"{path}: not a segment file name: a segment's name is its base offset in 20 "
        f"digits, as 00000000000000000000{path.suffix}"]
    result = pybroker_run("dump-log-segments", "--files", str(path))
    assert result.returncode == 1
    assert result.stderr.splitlines() == err.getvalue().splitlines()


# -- console-consumer on a missing topic ------------------------------------------------


@pytest.mark.parametrize("group", [None, "ux-missing-group"])
def test_console_consumer_on_a_missing_topic_says_so(broker: Broker, group: str | None) -> None:
    topic = f"ux-missing-{group or 'assign'}"
    args = ["console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
            "--from-beginning", "--timeout-ms", "3000"]
    if group:
        args += ["--group", group]
    result = pybroker_run(*args)
    assert result.returncode == 0, result.stderr
    member = f", groupId={group}" if group else ""
    assert result.stderr.splitlines() == [
        f"WARN [Consumer clientId=console-consumer{member}] Error while fetching metadata: "
        f"{{{topic}=UNKNOWN_TOPIC_OR_PARTITION}}",
        "Processed a total of 0 messages"]


# -- librdkafka's lines, and failures in one line ---------------------------------------


@pytest.fixture
def hanging_up_port() -> Iterator[int]:
    """A port that accepts each connection and closes it at once: the client connects
    (so the tool does not end at a refused connect) and logs each failure."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    done.set()
    thread.join(5)
    server.close()


def test_client_lines_only_with_verbose(hanging_up_port: int) -> None:
    bootstrap = f"127.0.0.1:{hanging_up_port}"
    props = ["--command-config", "/dev/null", "--timeout", "2000"]
    quiet = pybroker_run("consumer-groups", "--bootstrap-server", bootstrap, "--list", *props)
    assert quiet.returncode == 1
    assert len(quiet.stderr.splitlines()) == 1, quiet.stderr
    assert not CLIENT_LINE.search(quiet.stderr), quiet.stderr
    verbose = pybroker_run("consumer-groups", "--bootstrap-server", bootstrap, "--list",
                           *props, "--verbose")
    assert verbose.returncode == 1
    assert CLIENT_LINE.search(verbose.stderr), verbose.stderr
    assert "Traceback" not in verbose.stderr


@pytest.fixture
def client_logger_level() -> Iterator[None]:
    saved = _common.CLIENT_LOGGER.level
    yield
    _common.CLIENT_LOGGER.setLevel(saved)


@pytest.mark.usefixtures("client_logger_level")
@pytest.mark.parametrize(("level", "log_level"), [
    (logging.CRITICAL, 0), (logging.ERROR, 3), (logging.WARNING, 4), (logging.INFO, 6),
    (logging.DEBUG, 7)])
def test_librdkafka_log_level_follows_the_client_logger(level: int, log_level: int) -> None:
    # librdkafka drops lines below its log_level itself: silent by default, so the lines it
    # would print on its own (at shutdown, `%6|...|BGQUEUE|...`) never reach the terminal
    _common.CLIENT_LOGGER.setLevel(level)
    assert _common.client_config("127.0.0.1:1")["log_level"] == log_level
    given = _common.client_config("127.0.0.1:1", {"log_level": "6"})
    assert given["log_level"] == "6"


def test_an_unexpected_failure_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str],
                                           hanging_up_port: int) -> None:
    from pybroker.tools import topics

    def broken(args: argparse.Namespace) -> int:
        raise RuntimeError("something nobody expected")

    monkeypatch.setattr(topics, "run", broken)
    bootstrap = f"127.0.0.1:{hanging_up_port}"  # something listens: the tool runs
    assert cli.main(["topics", "--bootstrap-server", bootstrap, "--list"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == ["pybroker topics: ERROR RuntimeError: something nobody "
                                "expected (--verbose shows where)"]
    with pytest.raises(RuntimeError):
        cli.main(["topics", "--bootstrap-server", bootstrap, "--list", "--verbose"])
