"""`pybroker consumer-groups` against a live broker: list, describe (lag), reset, delete."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

from confluent_kafka import TopicPartition

from .groupclients import GroupMember, poll_until
from .helpers import assert_delivered, create_topic, produce_all, producer

if TYPE_CHECKING:
    from conftest import BrokerFactory


def tool(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", "consumer-groups",
                           "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def table(out: str) -> list[list[str]]:
    lines = [line.split() for line in out.splitlines() if line.strip()]
    start = next(i for i, row in enumerate(lines) if row and row[0] == "GROUP")
    return lines[start:]


def test_consumer_groups_tool(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(group_initial_rebalance_delay_ms=0)
    create_topic(b.bootstrap, topic_name, 3)
    records = [{"value": b"v", "partition": i % 3} for i in range(30)]
    assert_delivered(produce_all(producer(b.bootstrap), topic_name, records))
    group = "tool-group"
    member = GroupMember(b.bootstrap, group, [topic_name])
    try:
        poll_until([member], lambda: len(member.messages) >= 30, what="read")
        member.consumer.commit(offsets=[TopicPartition(topic_name, p, 2 + p) for p in range(3)],
                               asynchronous=False)
        listed = tool(b.bootstrap, "--list")
        assert listed.returncode == 0, listed.stderr
        assert group in listed.stdout.split()
        described = tool(b.bootstrap, "--describe", "--group", group)
        assert described.returncode == 0, described.stderr
        rows = table(described.stdout)
        assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                           "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        assert [(r[2], r[3], r[4], r[5]) for r in rows[1:]] == [
            ("0", "2", "10", "8"), ("1", "3", "10", "7"), ("2", "4", "10", "6")]
        assert all(r[6].startswith("rdkafka-") and r[7] == "/127.0.0.1" for r in rows[1:])
        # an active group cannot be reset
        refused = tool(b.bootstrap, "--reset-offsets", "--group", group, "--topic", topic_name,
                       "--to-earliest", "--execute")
        assert refused.returncode == 1 and "inactive" in refused.stderr
    finally:
        member.close()
    dry = tool(b.bootstrap, "--reset-offsets", "--group", group, "--topic", f"{topic_name}:1",
               "--to-offset", "7", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert [r[2:] for r in table(dry.stdout)[1:]] == [["1", "7"]]
    done = tool(b.bootstrap, "--reset-offsets", "--group", group, "--topic", topic_name,
                "--to-latest", "--execute")
    assert done.returncode == 0, done.stderr
    rows = table(tool(b.bootstrap, "--describe", "--group", group).stdout)
    assert [(r[3], r[5]) for r in rows[1:]] == [("10", "0")] * 3
    earliest = tool(b.bootstrap, "--reset-offsets", "--group", group, "--topic", topic_name,
                    "--to-datetime", "2000-01-01T00:00:00.000", "--execute")
    assert [r[3] for r in table(earliest.stdout)[1:]] == ["0", "0", "0"]
    deleted = tool(b.bootstrap, "--delete", "--group", group)
    assert deleted.returncode == 0 and "successful" in deleted.stdout
    again = tool(b.bootstrap, "--delete", "--group", group)
    assert again.returncode == 1 and "does not exist" in again.stdout
    assert group not in tool(b.bootstrap, "--list").stdout.split()
