"""Shared fixtures: start pybroker as a subprocess on a free loopback port.

Environment:
  PYBROKER_TEST_BOOTSTRAP=host:port  run the client tests against an already running
      (external) Kafka-compatible broker; tests that need restart / kill / config
      overrides are skipped.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

EXTERNAL_ENV = "PYBROKER_TEST_BOOTSTRAP"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
LOG_TAIL_LINES = 150

# Brokers currently alive; their log tails are attached to failing test reports.
_LIVE_BROKERS: list[Broker] = []


def external_bootstrap() -> str | None:
    value = os.environ.get(EXTERNAL_ENV, "").strip()
    return value or None


#: ports free_port handed out in this run (see there)
_GIVEN_PORTS: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now and that this run has not handed out before: the
    kernel may give a just-released port again, and two brokers of one cluster were once
    handed the same port (the second failed to bind; CI)."""
    if len(_GIVEN_PORTS) > 10_000:  # far below the ephemeral range; never exhausts it
        _GIVEN_PORTS.clear()
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port


def _api_versions_ok(host: str, port: int, timeout: float = 2.0) -> bool:
    """One raw ApiVersions v0 round trip; True when the broker answers error_code 0."""
    client_id = b"pybroker-tests"
    header = struct.pack(">hhih", 18, 0, 0x5EED, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(header)) + header)
            size_raw = _recv_exact(s, 4)
            (size,) = struct.unpack(">i", size_raw)
            if size < 6 or size > 1 << 20:
                return False
            body = _recv_exact(s, size)
            corr, err = struct.unpack(">ih", body[:6])
            return corr == 0x5EED and err == 0
    except OSError:
        return False


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


@dataclass(eq=False)
class Broker:
    """A pybroker subprocess (or an external broker when ``external`` is True)."""

    host: str
    port: int
    data_dir: Path
    log_path: Path
    overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    external: bool = False
    #: soft RLIMIT_NOFILE of the broker process (None: inherited)
    nofile: int | None = None
    _log_file: object | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    # -- lifecycle -------------------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "pybroker", "serve"]
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
        }
        settings.update(self.overrides)
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, ready_timeout: float = START_TIMEOUT_S) -> Broker:
        if self.external:
            return self
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()/kill()
        log.write(f"\n===== start {time.strftime('%H:%M:%S')}: {self.command()}\n".encode())
        log.flush()
        self._log_file = log
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, preexec_fn=self._limit_files if self.nofile is not None else None,
        )
        if self not in _LIVE_BROKERS:
            _LIVE_BROKERS.append(self)
        self.wait_ready(ready_timeout)
        return self

    def _limit_files(self) -> None:
        """In the child before exec: the soft open-file limit (the hard one stays)."""
        assert self.nofile is not None
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, hard))

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"pybroker exited with {self.proc.returncode} during startup\n"
                    + self.log_tail()
                )
            if _api_versions_ok(self.host, self.port, timeout=1.0) and self._metrics_up():
                return
            time.sleep(0.1)
        tail = self.log_tail()
        self.kill()
        raise RuntimeError(f"pybroker not ready within {timeout}s\n{tail}")

    def _metrics_up(self) -> bool:
        """The metrics endpoint (if configured) accepts connections: it opens after the
        Kafka listeners, so a test scraping it right after start could find it closed."""
        port = int(self.overrides.get("metrics.port", "0") or 0)
        if port <= 0:
            return True
        try:
            with socket.create_connection((self.host, port), timeout=1.0):
                return True
        except OSError:
            return False

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait; kill -9 if it does not exit in time. Returns the exit code."""
        if self.external or self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._close_log()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9 (unclean stop)."""
        if self.external or self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._close_log()

    def restart(self) -> Broker:
        self.stop()
        return self.start()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None
        if self in _LIVE_BROKERS and (self.proc is None or self.proc.poll() is not None):
            _LIVE_BROKERS.remove(self)

    @property
    def running(self) -> bool:
        return self.external or (self.proc is not None and self.proc.poll() is None)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no broker log)"
        return "\n".join(text.splitlines()[-lines:])


BrokerFactory = Callable[..., Broker]


def _make_external() -> Broker:
    bootstrap = external_bootstrap()
    assert bootstrap
    host, _, port = bootstrap.rpartition(":")
    return Broker(host=host, port=int(port), data_dir=Path("/nonexistent"),
                  log_path=Path("/nonexistent"), external=True)


@pytest.fixture
def broker_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    """Start private brokers: ``broker_factory(**overrides)`` or with a dict.

    Keyword names use ``_`` for ``.``: ``broker_factory(num_partitions=4)`` or
    ``broker_factory({"num.partitions": "4"})``. Skips when an external broker is used.
    The returned Broker has ``.stop()`` (SIGTERM), ``.kill()`` (kill -9), ``.start()``
    and ``.restart()`` (same port, same data dir).
    """
    if external_bootstrap():
        pytest.skip(f"needs a private pybroker (restart/kill/overrides); {EXTERNAL_ENV} set")
    started: list[Broker] = []
    request.node._pybroker_brokers = started

    def factory(overrides: dict[str, object] | None = None, *, start: bool = True,
                **kw: object) -> Broker:
        merged: dict[str, str] = {}
        for key, value in (overrides or {}).items():
            merged[key] = str(value)
        for key, value in kw.items():
            merged[key.replace("_", ".")] = str(value)
        idx = len(started)
        b = Broker(host="127.0.0.1", port=free_port(), data_dir=tmp_path / f"data{idx}",
                   log_path=tmp_path / f"broker{idx}.log", overrides=merged)
        started.append(b)
        if start:
            b.start()
        return b

    yield factory
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A module-scoped broker with default settings (or the external one)."""
    if external_bootstrap():
        yield _make_external()
        return
    base = tmp_path_factory.mktemp("broker")
    b = Broker(host="127.0.0.1", port=free_port(), data_dir=base / "data",
               log_path=base / "broker.log")
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A unique, valid topic name derived from the test name."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-.")[:60]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    brokers: list[Broker] = list(getattr(item, "_pybroker_brokers", []))
    brokers += [b for b in _LIVE_BROKERS if b not in brokers]
    for b in brokers:
        if not b.external:
            report.sections.append((f"pybroker log {b.bootstrap} ({b.log_path})", b.log_tail()))
