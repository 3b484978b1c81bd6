"""What the client tools share: client configs from Kafka-style options, and a
progress line for terminals.

The tools are Kafka clients (confluent-kafka / librdkafka), so they drive stock
Kafka as well as pybroker. Kafka's Java client property names are passed to
librdkafka as they are (most are the same); the few that only mean something to
the Java client (serializers, interceptors) are dropped.

A tool pointed at a broker that is not there gives up after its timeout with one
line saying so: librdkafka's own log lines (a `%3|...|FAIL|` line per retry) go
to a logger that is silent unless `--log-level` asks for them, and its error
events are kept (`Reach`) to say what the client ran into."""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from pybroker.tools._security import to_librdkafka

#: Java-client-only properties librdkafka would reject
JAVA_ONLY_PROPERTIES = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "interceptor.classes", "partitioner.class", "buffer.memory", "max.block.ms",
    "metric.reporters", "exclude.internal.topics",
})

#: seconds between progress line redraws
PROGRESS_INTERVAL_S = 0.5

#: how long a tool waits for the brokers (per admin call, per record delivery) unless
#: told otherwise: the request.timeout.ms of Kafka's admin client and producer
DEFAULT_TIMEOUT_MS = 30000
#: Java client property naming a tool's per-call timeout (librdkafka does not know it)
TIMEOUT_PROPERTY = "default.api.timeout.ms"
#: one step of Reach.connect's wait: error events (a failed login) are served between
CONNECT_STEP_S = 0.25
#: slack given to a future's own wait beyond the client's timeout, so that the client's
#: error (with its reason) arrives before the wait gives up
FUTURE_GRACE_S = 5.0

#: where librdkafka's log lines go: silent by default (cli.main lowers the level when
#: --log-level is given)
CLIENT_LOGGER = logging.getLogger("pybroker.tools.client")
CLIENT_LOGGER.setLevel(logging.CRITICAL)


#: librdkafka's log_level (syslog severities) for CLIENT_LOGGER's level: the client
#: drops lines below it itself, so the few it prints on its own (at shutdown, from
#: its background thread, e.g. `%6|...|BGQUEUE|`) stay off the terminal too
SYSLOG_LEVELS = ((logging.DEBUG, 7), (logging.INFO, 6), (logging.WARNING, 4),
                 (logging.ERROR, 3), (logging.CRITICAL, 2))
#: librdkafka log_level that lets nothing through (syslog's "emergency" only)
SYSLOG_SILENT = 0


class ToolError(Exception):
    """A user-facing failure: printed without a traceback, exit status 1."""


def require_client() -> Any:
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401 - makes confluent_kafka.admin available
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ToolError("this tool needs confluent-kafka: pip install confluent-kafka") from exc
    return confluent_kafka


def parse_pairs(items: Iterable[str], what: str = "property") -> dict[str, str]:
    """`k=v` strings -> dict (the value may contain '=')."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"invalid {what} '{item}': expected key=value")
        pairs[key.strip()] = value.strip()
    return pairs


def read_properties(path: str | None) -> dict[str, str]:
    """A Java .properties file (key=value or key: value, # and ! comments)."""
    if not path:
        return {}
    props: dict[str, str] = {}
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from exc
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            props[line] = ""
        else:
            props[line[:cut].strip()] = line[cut + 1:].strip()
    return props


class Reach:
    """A tool's wait for its brokers: how long (`timeout_ms`), and, as the client's
    error_cb, the last connection error it saw, for the line printed on giving up."""

    def __init__(self, bootstrap: str, timeout_ms: int) -> None:
        self.bootstrap = bootstrap
        self.timeout_ms = timeout_ms
        self.last_error: str | None = None
        #: a broker answered connect(): a later timeout is a slow broker, not a missing one
        self.reached = False
        #: the brokers refused the login (reported once)
        self.refused = False

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000

    def __call__(self, error: Any) -> None:
        ck = require_client()
        # "1/1 brokers are down" says less than the connect failure that caused it
        if error.code() != ck.KafkaError._ALL_BROKERS_DOWN or self.last_error is None:
            self.last_error = error.str()
        if error.code() in (ck.KafkaError._AUTHENTICATION,
                            ck.KafkaError.SASL_AUTHENTICATION_FAILED) and not self.refused:
            self.refused = True
            # a wrong password stays wrong: waiting out the timeout cannot help. Raised
            # here, it ends the client call (poll, flush, consume) that served the event
            raise ToolError(f"authentication failed at {self.bootstrap}: {error.str()}")

    def failure(self) -> ToolError:
        why = f" (last error: {self.last_error})" if self.last_error else ""
        if self.reached:
            return ToolError(f"no answer from the brokers at {self.bootstrap} within "
                             f"{self.timeout_ms} ms{why}")
        return ToolError(f"no broker reachable at {self.bootstrap} within "
                         f"{self.timeout_ms} ms{why}")

    def unreachable(self, exc: BaseException) -> bool:
        """Whether a client exception means no broker answered in time."""
        if isinstance(exc, (TimeoutError, concurrent.futures.TimeoutError)):
            return True
        ck = require_client()
        error = exc.args[0] if exc.args else None
        code = error.code() if isinstance(error, ck.KafkaError) else None
        return code in (ck.KafkaError._TRANSPORT, ck.KafkaError._TIMED_OUT,
                        ck.KafkaError._ALL_BROKERS_DOWN, ck.KafkaError._RESOLVE)

    def connect(self, client: Any) -> None:
        """Wait until a broker answers a metadata request, or raise `failure()`."""
        ck = require_client()
        deadline = time.monotonic() + self.timeout_s
        while True:
            # short waits, serving the client's error events between them, so that an
            # authentication failure (raised by __call__) ends the wait at once
            left = deadline - time.monotonic()
            try:
                client.list_topics(timeout=max(0.001, min(CONNECT_STEP_S, left)))
            except ck.KafkaException as exc:
                client.poll(0)  # serve the error events queued meanwhile
                if not self.unreachable(exc):
                    raise ToolError(kafka_message(exc)) from None
                if left <= CONNECT_STEP_S:
                    raise self.failure() from None
                continue
            break
        self.reached = True

    def call(self, issue: Callable[[], Any], what: str) -> Any:
        """`issue()` (an admin client call returning one future) and its result, issued
        again after a retriable error until the timeout (tools/_retry.py)."""
        from pybroker.tools._retry import retrying

        return retrying(lambda: self.result(issue()), self.timeout_s, what)

    def result(self, future: Any) -> Any:
        """A client future's result; an unreachable broker becomes `failure()`."""
        try:
            return future.result(timeout=self.timeout_s + FUTURE_GRACE_S)
        except Exception as exc:
            if self.unreachable(exc):
                raise self.failure() from None
            raise


def kafka_message(exc: BaseException) -> str:
    """The message of a KafkaException's error (as Kafka prints the cause's message)."""
    error = exc.args[0] if exc.args else None
    text = getattr(error, "str", None)
    return text() if callable(text) else str(exc)


def client_config(bootstrap: str | None, *sources: dict[str, str],
                  timeout_ms: int | None = None) -> dict[str, Any]:
    """librdkafka config from property dicts (later ones win) and the bootstrap servers,
    with the client's log lines routed to CLIENT_LOGGER and its errors to a `Reach`
    (see `reach()`). Its timeout is `timeout_ms`, else the properties'
    default.api.timeout.ms, else DEFAULT_TIMEOUT_MS."""
    config: dict[str, Any] = {}
    for source in sources:
        config.update(source)
    given_timeout = config.pop(TIMEOUT_PROPERTY, None)
    for key in JAVA_ONLY_PROPERTIES & config.keys():
        del config[key]
    config = to_librdkafka(config)  # Kafka's security property names (--command-config)
    if bootstrap:
        config["bootstrap.servers"] = bootstrap
    if not config.get("bootstrap.servers"):
        raise ToolError("--bootstrap-server is required")
    if timeout_ms is None:
        try:
            timeout_ms = int(given_timeout) if given_timeout is not None else DEFAULT_TIMEOUT_MS
        except ValueError as exc:
            raise ToolError(f"invalid {TIMEOUT_PROPERTY} '{given_timeout}'") from exc
    config["logger"] = CLIENT_LOGGER
    config.setdefault("log_level", client_log_level())
    config["error_cb"] = Reach(config["bootstrap.servers"], timeout_ms)
    return config


def client_log_level() -> int:
    """librdkafka's log_level for CLIENT_LOGGER's level (silent unless --verbose or
    --log-level asked for the client's lines)."""
    level = CLIENT_LOGGER.getEffectiveLevel()
    if level >= logging.CRITICAL:
        return SYSLOG_SILENT
    return next(syslog for py, syslog in SYSLOG_LEVELS if level <= py)


def stdout_gone() -> None:
    """After a BrokenPipeError on stdout (`pybroker ... | head`): point stdout at
    /dev/null, so the interpreter's last flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def with_delivery_timeout(config: dict[str, Any]) -> dict[str, Any]:
    """A producer config whose records fail (instead of waiting librdkafka's 5 minutes)
    when no broker acknowledges them within the tool's timeout, unless the properties
    set a delivery timeout themselves."""
    if not {"delivery.timeout.ms", "message.timeout.ms"} & config.keys():
        config["message.timeout.ms"] = str(reach(config).timeout_ms)
    return config


def delivery_error(config: dict[str, Any], error: Any) -> str:
    """A failed delivery's error, with the connection error behind a timeout."""
    ck = require_client()
    text: str = error.str()
    last = reach(config).last_error
    if error.code() == ck.KafkaError._MSG_TIMED_OUT:
        timeout = config.get("message.timeout.ms") or config.get("delivery.timeout.ms")
        text += f" after {timeout} ms"
        if last:
            text += f" (last error: {last})"
    return text


def reach(config: dict[str, Any]) -> Reach:
    """The `Reach` of a config made by client_config."""
    found = config["error_cb"]
    assert isinstance(found, Reach)
    return found


def add_bootstrap(parser: argparse.ArgumentParser, *aliases: str) -> None:
    parser.add_argument("--bootstrap-server", *aliases, dest="bootstrap_server",
                        metavar="HOST:PORT",
                        help="the broker(s) to connect to (pybroker or Kafka); default "
                             "bootstrap.servers of the client properties, else "
                             "$PYBROKER_BOOTSTRAP_SERVER, else localhost:9092")


class Progress:
    """One self-overwriting status line on stderr, shown only when stdout is a terminal
    (so piped or captured output stays exactly Kafka's)."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self._last = 0.0
        self._width = 0

    def update(self, text: str, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def bar(done: int, total: int, width: int = 30) -> str:
    share = min(1.0, done / total) if total > 0 else 0.0
    filled = int(share * width)
    return "[" + "#" * filled + "-" * (width - filled) + f"] {share * 100:5.1f}%"
