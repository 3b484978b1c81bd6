"""kafka-consumer-groups.sh options an operator reaches for (issue 27): --list --state,
--reset-offsets --shift-by / --to-current / --by-duration / --from-file and --export,
--delete-offsets; the real tool against a real broker, its output checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Producer, TopicPartition

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS)]
from integration.helpers import create_topic  # noqa: E402

if TYPE_CHECKING:
    from conftest import Broker

RUN_TIMEOUT_S = 90


def groups(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", "consumer-groups",
                           "--bootstrap-server", broker.bootstrap, *args], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)


def new_offsets(out: str) -> dict[int, int]:
    """PARTITION -> NEW-OFFSET of a reset table."""
    rows = [line.split() for line in out.splitlines()[2:] if line.strip()]
    return {int(row[2]): int(row[3]) for row in rows}


def committed(broker: Broker, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def setup(broker: Broker, topic: str, group: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce(topic, value=b"v", partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)],
                    asynchronous=False)
    consumer.close()


def test_reset_options_export_and_from_file(broker: Broker, topic_name: str,
                                            tmp_path: Path) -> None:
    group = f"g-{topic_name}"
    setup(broker, topic_name, group)
    scope = ["--group", group, "--topic", topic_name, "--reset-offsets"]
    shifted = groups(broker, *scope, "--shift-by", "-3", "--dry-run")
    assert shifted.returncode == 0, shifted.stderr
    assert new_offsets(shifted.stdout) == {0: 2, 1: 4}, shifted.stdout
    clamped = groups(broker, *scope, "--shift-by", "100", "--dry-run")
    assert new_offsets(clamped.stdout) == {0: 10, 1: 10}, clamped.stdout  # the log ends
    exported = groups(broker, *scope, "--to-current", "--dry-run", "--export")
    assert exported.stdout.splitlines() == [f"{topic_name},0,5", f"{topic_name},1,7"]
    recent = groups(broker, *scope, "--by-duration", "PT1H", "--dry-run")
    assert new_offsets(recent.stdout) == {0: 0, 1: 0}, recent.stdout
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic_name},0,1\n{topic_name},1,2\n")
    applied = groups(broker, "--group", group, "--reset-offsets", "--from-file", str(plan),
                     "--execute")
    assert applied.returncode == 0, applied.stderr
    assert committed(broker, group, topic_name) == {0: 1, 1: 2}


def test_list_state_and_delete_offsets(broker: Broker, topic_name: str) -> None:
    group = f"g-{topic_name}"
    setup(broker, topic_name, group)
    listed = groups(broker, "--list", "--state")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines() if line.strip()]
    assert rows[0] == ["GROUP", "STATE"] and [group, "Empty"] in rows, listed.stdout
    deleted = groups(broker, "--group", group, "--delete-offsets", "--topic", topic_name)
    assert deleted.returncode == 0, deleted.stderr
    lines = [line.split() for line in deleted.stdout.splitlines() if line.strip()]
    assert lines == [["TOPIC", "PARTITION", "STATUS"], [topic_name, "0", "Successful"],
                     [topic_name, "1", "Successful"]], deleted.stdout
    assert committed(broker, group, topic_name) == {}
    # nothing committed: nothing to shift, as Kafka says
    shift = groups(broker, "--group", group, "--topic", topic_name, "--reset-offsets",
                   "--shift-by", "1", "--dry-run")
    assert shift.returncode == 1
    assert "since there is no current committed offset" in shift.stderr, shift.stderr
