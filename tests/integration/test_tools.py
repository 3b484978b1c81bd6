"""Every client tool subcommand, run as `python -m pybroker ...` against a live broker
(or the external one in PYBROKER_TEST_BOOTSTRAP: the tools are plain Kafka clients)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import Broker

TOOL_TIMEOUT_S = 60

PRODUCER_TOTAL = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.$")
PRODUCER_WINDOW = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency\.$")
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
CONSUMER_ROW = re.compile(
    rf"^({TIME}), ({TIME}), ([\d.]+), ([\d.]+), (\d+), ([\d.]+), (-?\d+), (-?\d+), "
    r"([\d.]+|NaN|nan), ([\d.]+|NaN|nan)$")


def tool(*args: str, stdin: str | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "pybroker", *args], input=stdin,
                          capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    if check:
        assert proc.returncode == 0, f"{args}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def topics(broker: Broker, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return tool("topics", "--bootstrap-server", broker.bootstrap, *args, check=check)


def test_topics_create_list_describe_alter_delete(broker: Broker, topic_name: str) -> None:
    created = topics(broker, "--create", "--topic", topic_name, "--partitions", "3",
                     "--replication-factor", "1", "--config", "retention.ms=3600000",
                     "--config", "cleanup.policy=delete")
    assert created.stdout == f"Created topic {topic_name}.\n"

    again = topics(broker, "--create", "--topic", topic_name, "--partitions", "3",
                   check=False)
    assert again.returncode == 1
    assert "Error while executing topic command" in again.stderr
    assert "already exists" in again.stderr
    assert topics(broker, "--create", "--if-not-exists", "--topic", topic_name).stdout == ""

    assert topic_name in topics(broker, "--list").stdout.splitlines()

    lines = topics(broker, "--describe", "--topic", topic_name).stdout.splitlines()
    head = lines[0].split("\t")
    assert head[0] == f"Topic: {topic_name}"
    fields = dict(f.split(": ", 1) for f in head[1:])
    assert fields["PartitionCount"] == "3"
    assert fields["ReplicationFactor"] == "1"
    configs = dict(kv.split("=", 1) for kv in fields["Configs"].split(",") if kv)
    assert configs["retention.ms"] == "3600000"
    assert len(lines) == 4
    for index, line in enumerate(lines[1:]):
        assert line.startswith("\t")
        parts = dict(f.split(": ", 1) for f in line[1:].split("\t"))
        assert parts["Topic"] == topic_name
        assert parts["Partition"] == str(index)
        assert parts["Leader"] == parts["Replicas"] == parts["Isr"]

    assert topics(broker, "--alter", "--topic", topic_name, "--partitions", "5").stdout == ""
    lines = topics(broker, "--describe", "--topic", topic_name).stdout.splitlines()
    assert "\tPartitionCount: 5\t" in lines[0]
    assert len(lines) == 6

    # --topic is a regular expression for describe
    pattern = re.escape(topic_name[:-4]) + ".*"
    assert topics(broker, "--describe", "--topic", pattern).stdout.splitlines()[0] == lines[0]

    assert topics(broker, "--delete", "--topic", topic_name).stdout == ""
    gone = topics(broker, "--describe", "--topic", topic_name, check=False)
    assert gone.returncode == 1
    assert f"Topic '{topic_name}' does not exist as expected" in gone.stderr
    assert topics(broker, "--describe", "--if-exists", "--topic", topic_name).stdout == ""


def test_console_producer_and_consumer(broker: Broker, topic_name: str) -> None:
    topics(broker, "--create", "--topic", topic_name, "--partitions", "2")
    lines = [f"k{i}:value {i}" for i in range(20)]
    tool("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
         "--property", "parse.key=true", "--property", "key.separator=:",
         stdin="\n".join(lines) + "\n")

    got = tool("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic",
               topic_name, "--from-beginning", "--max-messages", "20",
               "--property", "print.key=true", "--property", "key.separator=|",
               "--property", "print.timestamp=true", "--property", "print.partition=true",
               "--property", "print.offset=true")
    assert got.stderr.strip().endswith("Processed a total of 20 messages")
    rows = [line.split("|") for line in got.stdout.splitlines()]
    assert len(rows) == 20
    for ts, partition, offset, key, value in rows:
        assert re.fullmatch(r"CreateTime:\d{13}", ts)
        assert re.fullmatch(r"Partition:[01]", partition)
        assert re.fullmatch(r"Offset:\d+", offset)
        assert value == f"value {key[1:]}"
    assert sorted(f"{r[3]}:{r[4]}" for r in rows) == sorted(lines)
    # the same key always lands in the same partition
    by_key = {r[3]: r[1] for r in rows}
    assert len(by_key) == 20

    # values only, stop after a quiet --timeout-ms
    plain = tool("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic",
                 topic_name, "--from-beginning", "--timeout-ms", "1500")
    assert sorted(plain.stdout.splitlines()) == sorted(line.split(":", 1)[1] for line in lines)
    assert "Processed a total of 20 messages" in plain.stderr

    # without --from-beginning only new records are read: none here
    tail = tool("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic",
                topic_name, "--timeout-ms", "1000")
    assert tail.stdout == ""
    assert "Processed a total of 0 messages" in tail.stderr


def test_console_producer_reports_missing_separator(broker: Broker, topic_name: str) -> None:
    topics(broker, "--create", "--topic", topic_name, "--partitions", "1")
    bad = tool("console-producer", "--bootstrap-server", broker.bootstrap, "--topic",
               topic_name, "--property", "parse.key=true", stdin="no separator here\n",
               check=False)
    assert bad.returncode == 1
    assert "No key separator found on line number 1: 'no separator here'" in bad.stderr


def test_perf_tests(broker: Broker, topic_name: str) -> None:
    topics(broker, "--create", "--topic", topic_name, "--partitions", "2")
    produced = tool("producer-perf-test", "--topic", topic_name, "--num-records", "3000",
                    "--record-size", "100", "--throughput", "-1", "--producer-props",
                    f"bootstrap.servers={broker.bootstrap}", "acks=1", "linger.ms=5")
    last = produced.stdout.splitlines()[-1]
    m = PRODUCER_TOTAL.match(last)
    assert m, last
    assert int(m.group(1)) == 3000
    assert float(m.group(2)) > 0
    p50, p95, p99, p999 = (int(m.group(i)) for i in range(6, 10))
    assert p50 <= p95 <= p99 <= p999 <= float(m.group(5))

    consumed = tool("consumer-perf-test", "--bootstrap-server", broker.bootstrap,
                    "--topic", topic_name, "--messages", "3000", "--timeout", "10000")
    header, row = consumed.stdout.splitlines()
    assert header == CONSUMER_HEADER
    m = CONSUMER_ROW.match(row)
    assert m, row
    assert int(m.group(5)) == 3000
    assert float(m.group(3)) == pytest.approx(3000 * 100 / 1024 / 1024, abs=1e-4)
    assert int(m.group(7)) + int(m.group(8)) >= 0


def test_producer_perf_test_throttles_and_reports_windows(broker: Broker,
                                                           topic_name: str) -> None:
    topics(broker, "--create", "--topic", topic_name, "--partitions", "1")
    produced = tool("producer-perf-test", "--topic", topic_name, "--num-records", "600",
                    "--record-size", "10", "--throughput", "400", "--bootstrap-server",
                    broker.bootstrap, "--reporting-interval", "500")
    lines = produced.stdout.splitlines()
    windows = [PRODUCER_WINDOW.match(line) for line in lines[:-1]]
    assert windows and all(windows), lines
    total = PRODUCER_TOTAL.match(lines[-1])
    assert total, lines[-1]
    # 600 records at 400/s take about 1.5 s
    assert float(total.group(2)) < 600


def test_group_consumers(broker: Broker, topic_name: str) -> None:
    topics(broker, "--create", "--topic", topic_name, "--partitions", "2")
    tool("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
         stdin="".join(f"line {i}\n" for i in range(30)))
    group = f"{topic_name}-g"
    first = tool("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic",
                 topic_name, "--group", group, "--from-beginning", "--max-messages", "30",
                 "--timeout-ms", "20000")
    assert sorted(first.stdout.splitlines()) == sorted(f"line {i}" for i in range(30))
    assert "Processed a total of 30 messages" in first.stderr
    # the group committed its position: nothing is left for it
    again = tool("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic",
                 topic_name, "--group", group, "--from-beginning", "--timeout-ms", "3000")
    assert again.stdout == ""

    perf = tool("consumer-perf-test", "--bootstrap-server", broker.bootstrap, "--topic",
                topic_name, "--messages", "30", "--group", f"{group}-perf", "--hide-header")
    row, = perf.stdout.splitlines()
    m = CONSUMER_ROW.match(row)
    assert m, row
    assert int(m.group(5)) == 30
    assert int(m.group(7)) > 0  # time spent joining the group
