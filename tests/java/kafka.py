"""Run stock Apache Kafka's own applications (bin/*.sh of a distribution at $KAFKA_HOME)
against pybroker: the Java client, the admin and console tools, Streams, Connect and
MirrorMaker 2. Every test here is skipped when KAFKA_HOME is not set (CI has no Kafka
distribution; a developer with one sets KAFKA_HOME=/path/to/kafka).

`tool()` runs a short-lived script to completion (bounded by a timeout) and returns
its exit code and output; `App` runs a long-lived one (Connect, MirrorMaker 2, a Streams
app, a verifiable client) in the background with its output in a file, and stops it
with SIGTERM or kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

KAFKA_HOME_ENV = "KAFKA_HOME"
TOOL_TIMEOUT_S = 120.0

requires_kafka = pytest.mark.skipif(
    not os.environ.get(KAFKA_HOME_ENV, "").strip(),
    reason=f"needs a stock Apache Kafka distribution: set {KAFKA_HOME_ENV}")


def kafka_home() -> Path:
    return Path(os.environ[KAFKA_HOME_ENV])


def script(name: str) -> str:
    return str(kafka_home() / "bin" / name)


def tool_env(log_dir: Path | None = None, **extra: str) -> dict[str, str]:
    """A small heap and a quick-starting JVM: tests run many tools on a shared box."""
    env = dict(os.environ)
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx384m")
    env.setdefault("KAFKA_JVM_PERFORMANCE_OPTS",
                   "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true")
    if log_dir is not None:
        env["LOG_DIR"] = str(log_dir)
    env.update(extra)
    return env


@dataclass
class ToolResult:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def ok(self) -> ToolResult:
        assert self.returncode == 0, f"{self.args} exited {self.returncode}:\n{self.output}"
        return self

    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]


def tool(name: str, *args: str, stdin: str | None = None,
         timeout: float = TOOL_TIMEOUT_S, **env: str) -> ToolResult:
    """Run bin/<name> to completion; the timeout is a test failure, not a hang."""
    cmd = [script(name), *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                          env=tool_env(**env), stdin=None if stdin is not None
                          else subprocess.DEVNULL)
    return ToolResult(cmd, proc.returncode, proc.stdout, proc.stderr)


def write_properties(path: Path, settings: dict[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


@dataclass(eq=False)
class App:
    """A long-running Kafka application started from bin/ (or kafka-run-class.sh)."""

    args: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    def start(self) -> App:
        assert self.proc is None or self.proc.poll() is not None
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()/kill()
        self._log.write(f"\n===== start {time.strftime('%H:%M:%S')}: {self.args}\n".encode())
        self._log.flush()
        # own process group: kafka-run-class.sh execs java, but kill the group anyway
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=tool_env(**self.env),
                                     start_new_session=True)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def _signal(self, sig: int) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (Kafka apps close cleanly on it), kill -9 after `timeout`."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(10)
        self._close()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9: no shutdown hook runs."""
        if self.proc is not None and self.proc.poll() is None:
            self._signal(signal.SIGKILL)
            self.proc.wait(10)
        self._close()

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 80) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def app(name: str, *args: str, log_path: Path, **env: str) -> App:
    return App([script(name), *args], log_path, env={"LOG_DIR": str(log_path.parent), **env})


def run_class(main_class: str, *args: str, log_path: Path, **env: str) -> App:
    return App([script("kafka-run-class.sh"), main_class, *args], log_path,
               env={"LOG_DIR": str(log_path.parent), **env})


def json_events(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a verifiable producer/consumer printed (other lines skipped)."""
    events: list[dict[str, Any]] = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return events
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def wait_until(condition: Callable[[], Any], timeout: float, what: str,
               poll: float = 0.5, on_timeout: Callable[[], str] | None = None) -> Any:
    """Poll until `condition()` is truthy; AssertionError naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(poll)
    extra = ("\n" + on_timeout()) if on_timeout else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})"
                         + extra)
