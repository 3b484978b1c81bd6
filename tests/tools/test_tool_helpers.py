"""Pure parts of the tools: option parsing, Kafka's output formats, throttling."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pybroker.cli import build_parser, discover_tools
from pybroker.tools._common import ToolError, client_config, parse_pairs, read_properties
from pybroker.tools.console_consumer import MessageFormatter
from pybroker.tools.console_producer import LineReader
from pybroker.tools.consumer_perf_test import Result
from pybroker.tools.producer_perf_test import Stats, Throttler, percentiles


def test_every_tool_is_a_subcommand() -> None:
    commands = {tool.COMMAND for tool in discover_tools()}
    assert {"topics", "console-producer", "console-consumer", "producer-perf-test",
            "consumer-perf-test"} <= commands
    args = build_parser().parse_args(["topics", "--bootstrap-server", "h:1", "--list"])
    assert args.list and args.bootstrap_server == "h:1"


def test_a_tool_run_imports_only_its_own_tool() -> None:
    """`pybroker reassign-partitions ...` imports that tool's module and no other (every
    tool together doubled a tool's start, and --verify is run in a loop while a move
    runs); each tool module is named after its command, so every tool gets this."""
    for tool in discover_tools():
        assert tool.__name__ == "pybroker.tools." + tool.COMMAND.replace("-", "_")
    probe = ("import contextlib, io, sys; from pybroker.cli import main\n"
             "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
             "    main(sys.argv[1:])\n"
             "print(sorted(m for m in sys.modules if m.startswith('pybroker.tools.') "
             "and not m.rsplit('.', 1)[1].startswith('_')))")
    done = subprocess.run([sys.executable, "-c", probe, "reassign-partitions", "--help"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "['pybroker.tools.reassign_partitions']"


def test_pairs_and_properties(tmp_path: Path) -> None:
    assert parse_pairs(["a=1", "b = x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ToolError):
        parse_pairs(["novalue"])
    props = tmp_path / "p.properties"
    props.write_text("# comment\n! also\nacks=all\nlinger.ms: 5\n\n"
                     "key.serializer=org.apache.kafka.StringSerializer\n")
    assert read_properties(str(props)) == {
        "acks": "all", "linger.ms": "5", "key.serializer": "org.apache.kafka.StringSerializer"}
    config = client_config("h:9092", read_properties(str(props)))
    assert config["bootstrap.servers"] == "h:9092"
    assert "key.serializer" not in config
    with pytest.raises(ToolError):
        client_config(None, {})


def test_line_reader() -> None:
    reader = LineReader({"parse.key": "true", "key.separator": "::"})
    assert reader.parse("k::v::w") == (b"k", b"v::w")
    with pytest.raises(ToolError, match="line number 2"):
        reader.parse("nothing")
    assert LineReader({}).parse("a\tb") == (None, b"a\tb")
    assert LineReader({"parse.key": "true", "ignore.error": "true"}).parse("x") == (None, b"x")


class _Msg:
    def __init__(self, key: bytes | None, value: bytes | None) -> None:
        self._key, self._value = key, value

    def timestamp(self) -> tuple[int, int]:
        return (1, 1700000000123)

    def partition(self) -> int:
        return 3

    def offset(self) -> int:
        return 42

    def headers(self) -> list[tuple[str, bytes | None]]:
        return [("h", b"1"), ("n", None)]

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def test_message_formatter_matches_kafkas_default() -> None:
    assert MessageFormatter({}).format(_Msg(b"k", b"v")) == b"v\n"
    everything = MessageFormatter({
        "print.timestamp": "true", "print.partition": "true", "print.offset": "true",
        "print.headers": "true", "print.key": "true", "key.separator": ":"})
    assert everything.format(_Msg(None, b"v")) == \
        b"CreateTime:1700000000123:Partition:3:Offset:42:h:1,n:null:null:v\n"
    key_only = MessageFormatter({"print.key": "true", "print.value": "false"})
    assert key_only.format(_Msg(b"k", b"v")) == b"k\n"


def test_producer_stats_lines() -> None:
    now = [100.0]
    out = io.StringIO()
    stats = Stats(10, out, clock=lambda: now[0], reporting_interval_ms=5000)
    for latency in range(1, 11):
        now[0] += 0.5
        stats.record(latency, 1024)
    window, = out.getvalue().splitlines()
    assert window == ("10 records sent, 2.0 records/sec (0.00 MB/sec), 5.5 ms avg latency, "
                      "10.0 ms max latency.")
    now[0] += 1.0
    stats.print_total()
    total = out.getvalue().splitlines()[-1]
    assert total == ("10 records sent, 1.666667 records/sec (0.00 MB/sec), 5.50 ms avg latency, "
                     "10.00 ms max latency, 6 ms 50th, 10 ms 95th, 10 ms 99th, 10 ms 99.9th.")
    assert percentiles([], (0.5,)) == [0]


def test_throttler() -> None:
    throttler = Throttler(100, start=0.0)
    assert throttler.wait(50, 0.1) == pytest.approx(0.4)
    assert throttler.wait(50, 1.0) == 0
    assert Throttler(-1, 0.0).wait(10**9, 0.0) == 0


def test_consumer_perf_row() -> None:
    row = Result(start_ms=1_700_000_000_000, end_ms=1_700_000_002_000, bytes=2 * 1024 * 1024,
                 messages=1000, rebalance_ms=500).row("%Y-%m-%d %H:%M:%S:%f")
    parts = row.split(", ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:000", parts[0])
    assert parts[2:] == ["2.0000", "1.0000", "1000", "500.0000", "500", "1500", "1.3333",
                         "666.6667"]


def test_configs_add_config_list_syntax() -> None:
    """kafka-configs.sh --add-config: k=v pairs, list values in square brackets."""
    from pybroker.tools.configs import parse_config_list

    assert parse_config_list("a=1,b=[x,y],c.d=z") == {"a": "1", "b": "x,y", "c.d": "z"}
    assert parse_config_list("") == {}
    with pytest.raises(ToolError):
        parse_config_list("novalue")


def test_topic_id_printed_as_kafka_does() -> None:
    """kafka-topics.sh prints Uuid.toString(): URL-safe base64 without padding."""
    import base64
    import uuid

    from pybroker.tools.topics import kafka_uuid

    raw = uuid.UUID("e5bfb1d4-d6ba-48f0-ab2d-ef553993aee7").bytes
    standard = base64.b64encode(raw).decode()  # what confluent-kafka's str() gives
    assert "+" in standard
    assert kafka_uuid(standard) == base64.urlsafe_b64encode(raw).decode().rstrip("=")
