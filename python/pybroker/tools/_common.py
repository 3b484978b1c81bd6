"""What the client tools share: client configs from Kafka-style options, and a
progress line for terminals.

The tools are Kafka clients (confluent-kafka / librdkafka), so they drive stock
Kafka as well as pybroker. Kafka's Java client property names are passed to
librdkafka as they are (most are the same); the few that only mean something to
the Java client (serializers, interceptors) are dropped."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

#: Java-client-only properties librdkafka would reject
JAVA_ONLY_PROPERTIES = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "interceptor.classes", "partitioner.class", "buffer.memory", "max.block.ms",
    "metric.reporters", "exclude.internal.topics",
})

#: seconds between progress line redraws
PROGRESS_INTERVAL_S = 0.5


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


def client_config(bootstrap: str | None, *sources: dict[str, str]) -> dict[str, str]:
    """librdkafka config from property dicts (later ones win) and the bootstrap servers."""
    config: dict[str, str] = {}
    for source in sources:
        config.update(source)
    for key in JAVA_ONLY_PROPERTIES & config.keys():
        del config[key]
    if bootstrap:
        config["bootstrap.servers"] = bootstrap
    # librdkafka's informational lines (level 6) would mix into Kafka's output
    config.setdefault("log_level", "5")
    if not config.get("bootstrap.servers"):
        raise ToolError("--bootstrap-server is required")
    return config


def add_bootstrap(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--bootstrap-server", required=required, metavar="HOST:PORT",
                        help="the broker(s) to connect to (pybroker or Kafka)")


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
