"""`pybroker verifiable-producer` / `verifiable-consumer` / `e2e-latency` against a live
broker: their JSON events (or Kafka's latency lines) checked against what the broker
holds, read back with confluent-kafka."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import Broker

TIMEOUT_S = 60


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", *args], capture_output=True,
                          text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def create(broker: Broker, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def read_all(broker: Broker, topic: str, partitions: int) -> dict[tuple[int, int], Any]:
    """Every record of the topic by (partition, offset)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "verify-reader",
                         "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        found: dict[tuple[int, int], Any] = {}
        for _ in range(200):
            if len(found) >= sum(ends.values()):
                break
            for msg in consumer.consume(100, timeout=0.5):
                assert msg.error() is None, msg.error()
                found[(msg.partition(), msg.offset())] = msg
        assert len(found) == sum(ends.values())
        return found
    finally:
        consumer.close()


def produce(broker: Broker, topic: str, *extra: str) -> list[dict[str, Any]]:
    result = tool("verifiable-producer", "--bootstrap-server", broker.bootstrap,
                  "--topic", topic, *extra)
    assert result.returncode == 0, result.stderr
    return events(result.stdout)


def test_producer_events_match_the_log(broker: Broker, topic_name: str) -> None:
    create(broker, topic_name, 3)
    got = produce(broker, topic_name, "--max-messages", "30", "--value-prefix", "7",
                  "--repeating-keys", "4", "--acks", "-1")
    names = [e["name"] for e in got]
    assert names[0] == "startup_complete"
    assert names[-2:] == ["shutdown_complete", "tool_data"]
    sent = [e for e in got if e["name"] == "producer_send_success"]
    assert len(sent) == 30 and "producer_send_error" not in names
    assert sorted(e["value"] for e in sent) == sorted(f"7.{i}" for i in range(30))
    assert all(e["timestamp"] > 0 and e["topic"] == topic_name for e in got[1:-2])
    log = read_all(broker, topic_name, 3)
    assert len(log) == 30
    for e in sent:  # each acknowledged send is on the broker where the event says
        msg = log[(e["partition"], e["offset"])]
        assert msg.value().decode() == e["value"]
        assert msg.key().decode() == e["key"]
        assert int(e["key"]) == int(e["value"].split(".")[1]) % 4
    data = got[-1]
    assert (data["sent"], data["acked"], data["target_throughput"]) == (30, 30, -1)
    assert data["avg_throughput"] > 0


def test_producer_create_time_and_no_keys(broker: Broker, topic_name: str) -> None:
    create(broker, topic_name, 1)
    got = produce(broker, topic_name, "--max-messages", "3", "--message-create-time",
                  "1600000000000", "--throughput", "100")
    sent = [e for e in got if e["name"] == "producer_send_success"]
    assert [(e["key"], e["value"], e["offset"]) for e in sent] == [
        (None, "0", 0), (None, "1", 1), (None, "2", 2)]
    log = read_all(broker, topic_name, 1)
    assert log[(0, 0)].key() is None
    stamps = [log[(0, o)].timestamp()[1] for o in range(3)]
    assert stamps[0] == 1600000000000
    assert all(1600000000000 <= s < 1600000000000 + 60000 for s in stamps)


def test_producer_send_errors_are_events(broker: Broker, topic_name: str,
                                         tmp_path: Path) -> None:
    # a topic that does not exist and may not be auto-created: each send fails
    props = tmp_path / "producer.properties"
    props.write_text("allow.auto.create.topics=false\nmessage.timeout.ms=2000\n")
    got = produce(broker, topic_name + "-x", "--max-messages", "2", "--command-config",
                  str(props))
    errors = [e for e in got if e["name"] == "producer_send_error"]
    assert [e["value"] for e in errors] == ["0", "1"]
    assert all(e["exception"] and e["message"] for e in errors)
    assert got[-1]["name"] == "tool_data" and (got[-1]["sent"], got[-1]["acked"]) == (2, 0)


def committed(broker: Broker, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                 timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", [
    ("--assignment-strategy", "org.apache.kafka.clients.consumer.RangeAssignor"),
    ("--assignment-strategy", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"),
    ("--group-protocol", "consumer"),
], ids=["classic-range", "classic-cooperative", "consumer"])
def test_consumer_events_add_up_to_what_was_produced(broker: Broker, topic_name: str,
                                                     protocol: tuple[str, str]) -> None:
    create(broker, topic_name, 3)
    produced = produce(broker, topic_name, "--max-messages", "40")
    assert sum(e["name"] == "producer_send_success" for e in produced) == 40
    group = topic_name + "-g"
    result = tool("verifiable-consumer", "--bootstrap-server", broker.bootstrap,
                  "--topic", topic_name, "--group-id", group, "--max-messages", "40",
                  "--verbose", "--session-timeout", "10000", *protocol)
    assert result.returncode == 0, result.stderr
    got = events(result.stdout)
    names = [e["name"] for e in got]
    assert names[0] == "startup_complete" and names[-1] == "shutdown_complete"
    assigned = [p for e in got if e["name"] == "partitions_assigned" for p in e["partitions"]]
    assert sorted(p["partition"] for p in assigned) == [0, 1, 2]
    batches = [e for e in got if e["name"] == "records_consumed"]
    summaries = [s for e in batches for s in e["partitions"]]
    assert sum(s["count"] for s in summaries) == 40
    for s in summaries:  # each summary's offsets are a contiguous run
        assert s["maxOffset"] - s["minOffset"] + 1 == s["count"]
    data = [e for e in got if e["name"] == "record_data"]
    log = read_all(broker, topic_name, 3)
    assert sorted((e["partition"], e["offset"]) for e in data) == sorted(log)
    for e in data:
        assert e["value"] == log[(e["partition"], e["offset"])].value().decode()
    # every batch was committed, and the last commit per partition is the group's offset
    commits = [e for e in got if e["name"] == "offsets_committed"]
    assert len(commits) == len(batches) and all(e["success"] for e in commits)
    last = {o["partition"]: o["offset"] for e in commits for o in e["offsets"]}
    ends = {p: sum(1 for (q, _) in log if q == p) for p in range(3)}
    assert last == {p: n for p, n in ends.items() if n}
    assert committed(broker, group, topic_name, 3) == {
        p: (n if n else -1001) for p, n in ends.items()}


def run_until_sigterm(args: list[str], enough: Callable[[list[dict[str, Any]]], bool]
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run `pybroker ARGS`, read its events until enough(events so far) (bounded), then
    SIGTERM it: (the events before, the events it printed while stopping). It must exit 0."""
    proc = subprocess.Popen([sys.executable, "-m", "pybroker", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + TIMEOUT_S
        while not enough(lines) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(json.loads(line))
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    return lines, events(rest)


def test_consumer_stops_on_sigterm_with_autocommit(broker: Broker, topic_name: str) -> None:
    create(broker, topic_name, 1)
    produce(broker, topic_name, "--max-messages", "10")
    group = topic_name + "-g"

    def consumed(lines: list[dict[str, Any]]) -> int:
        return sum(s["count"] for e in lines if e["name"] == "records_consumed"
                   for s in e["partitions"])

    lines, tail = run_until_sigterm(
        ["verifiable-consumer", "--bootstrap-server", broker.bootstrap, "--topic",
         topic_name, "--group-id", group, "--enable-autocommit"],
        lambda lines: consumed(lines) >= 10)
    assert consumed(lines) == 10, lines
    assert tail[-1]["name"] == "shutdown_complete"
    assert not [e for e in lines + tail if e["name"] == "offsets_committed"]  # auto-commit
    assert committed(broker, group, topic_name, 1) == {0: 10}  # committed on close


def test_e2e_latency_prints_kafkas_lines(broker: Broker, topic_name: str) -> None:
    import re

    result = tool("e2e-latency", broker.bootstrap, topic_name, "20", "all", "100")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # the topic did not exist: created as Kafka creates it
    assert lines[0] == (f'Topic "{topic_name}" does not exist. Will create topic with 1 '
                        "partition(s) and replication factor = 1")
    assert re.fullmatch(r"0\t\d+\.\d+(e-?\d+)?", lines[1]), lines
    assert re.fullmatch(r"Avg latency: \d+\.\d{4} ms", lines[-2]), lines
    p50, p99, p999 = map(int, re.fullmatch(
        r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)", lines[-1]).groups())
    assert 0 <= p50 <= p99 <= p999
    # the records went through the broker: 20 counted plus the one opening the connections
    log = read_all(broker, topic_name, 1)
    assert len(log) == 21 and all(len(m.value()) == 100 for m in log.values())


def test_e2e_latency_refuses_acks_0(broker: Broker, topic_name: str) -> None:
    result = tool("e2e-latency", broker.bootstrap, topic_name, "5", "0", "10")
    assert result.returncode == 1
    assert "Latency testing requires synchronous acknowledgement" in result.stderr


def test_producer_runs_until_sigterm_then_closes(broker: Broker, topic_name: str) -> None:
    create(broker, topic_name, 1)

    def successes(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in lines if e["name"] == "producer_send_success"]

    lines, tail = run_until_sigterm(
        ["verifiable-producer", "--bootstrap-server", broker.bootstrap, "--topic",
         topic_name, "--throughput", "50"],  # --max-messages -1: until stopped
        lambda lines: len(successes(lines)) >= 10)
    assert len(successes(lines)) == 10
    assert [e["name"] for e in tail[-2:]] == ["shutdown_complete", "tool_data"]
    sent = successes(lines) + successes(tail)
    data = tail[-1]
    assert data["acked"] == len(sent) == data["sent"] and data["target_throughput"] == 50
    log = read_all(broker, topic_name, 1)
    assert sorted(log) == sorted((0, e["offset"]) for e in sent)
    assert all(log[(0, e["offset"])].value().decode() == e["value"] for e in sent)
