"""kafka-topics.sh options an operator reaches for (issue 27): --replica-assignment,
--topics-with-overrides, --under-min-isr-partitions, --at-min-isr-partitions, and
--alter --config pointing to `configs`; the real tool against a real broker."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Broker

RUN_TIMEOUT_S = 90


def topics(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", "topics", "--bootstrap-server",
                           broker.bootstrap, *args], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)


def partition_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("\tTopic: ")]


def test_replica_assignment_and_the_min_isr_filters(broker: Broker, topic_name: str) -> None:
    created = topics(broker, "--create", "--topic", topic_name, "--replica-assignment",
                     "0,0,0", "--config", "min.insync.replicas=2")
    assert created.returncode == 0, created.stderr
    described = topics(broker, "--describe", "--topic", topic_name)
    assert len(partition_lines(described.stdout)) == 3, described.stdout
    # one replica, min.insync.replicas=2: every partition is under its min ISR
    under = topics(broker, "--describe", "--topic", topic_name, "--under-min-isr-partitions")
    assert under.returncode == 0, under.stderr
    assert partition_lines(under.stdout) == partition_lines(described.stdout), under.stdout
    assert not under.stdout.startswith("Topic: "), under.stdout  # no topic line, as Kafka
    at = topics(broker, "--describe", "--topic", topic_name, "--at-min-isr-partitions")
    assert at.stdout == "", at.stdout


def test_at_min_isr(broker: Broker, topic_name: str) -> None:
    assert topics(broker, "--create", "--topic", topic_name, "--partitions", "2").returncode == 0
    at = topics(broker, "--describe", "--topic", topic_name, "--at-min-isr-partitions")
    assert len(partition_lines(at.stdout)) == 2, at.stdout  # ISR 1 == min.insync.replicas 1


def test_topics_with_overrides(broker: Broker, topic_name: str) -> None:
    assert topics(broker, "--create", "--topic", topic_name, "--config",
                  "retention.ms=123456").returncode == 0
    shown = topics(broker, "--describe", "--topic", topic_name, "--topics-with-overrides")
    assert shown.stdout.splitlines()[0].startswith(f"Topic: {topic_name}\t"), shown.stdout
    assert "retention.ms=123456" in shown.stdout
    assert partition_lines(shown.stdout) == [], shown.stdout


def test_a_bad_replica_assignment_and_alter_config_say_what_to_do(broker: Broker,
                                                                   topic_name: str) -> None:
    bad = topics(broker, "--create", "--topic", topic_name, "--replica-assignment", "0:x")
    assert bad.returncode == 1
    assert "invalid --replica-assignment '0:x'" in bad.stderr, bad.stderr
    assert topics(broker, "--create", "--topic", topic_name).returncode == 0
    alter = topics(broker, "--alter", "--topic", topic_name, "--config", "retention.ms=5")
    assert alter.returncode == 1
    assert (f"pybroker configs --entity-type topics --entity-name {topic_name} --alter "
            "--add-config retention.ms=5") in alter.stderr, alter.stderr
