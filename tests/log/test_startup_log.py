"""The broker's own log at a start (issue 27): one INFO line per phase with its counts and
time -- logs loaded (and, after a kill -9, how many were recovered and how many bytes
truncated), groups loaded, transactional ids loaded -- instead of a line per partition,
which stays at DEBUG; a torn tail is a WARNING that says what it means."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Producer, TopicPartition

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS)]
from integration.helpers import create_topic  # noqa: E402

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

WAIT_S = 60.0
GARBAGE = b"torn-tail-bytes"
INFO_LINE = re.compile(r"^\[[^]]+\] INFO (.*) \(([\w.]+)\)$")


def start_log(broker: Broker) -> str:
    """The log of the broker's latest start."""
    return broker.log_path.read_text().rsplit("===== start", 1)[-1]


def wait_for_line(broker: Broker, pattern: str) -> re.Match[str]:
    deadline = time.monotonic() + WAIT_S
    while True:
        found = re.search(pattern, start_log(broker), re.MULTILINE)
        if found:
            return found
        assert time.monotonic() < deadline, f"no {pattern!r} in:\n{start_log(broker)}"
        time.sleep(0.2)


def fill(broker: Broker, topic: str) -> None:
    """Records in 3 partitions, a group's committed offsets, a committed transaction."""
    create_topic(broker.bootstrap, topic, partitions=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": "startup-log"})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, value=b"v%d" % i, partition=i % 3)
    producer.commit_transaction(WAIT_S)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "startup-log",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    consumer.close()


def test_a_restart_after_kill_9_logs_one_line_per_phase(broker_factory: BrokerFactory,
                                                        topic_name: str) -> None:
    broker = broker_factory(group_initial_rebalance_delay_ms=0,
                            offsets_topic_replication_factor=1,
                            transaction_state_log_replication_factor=1,
                            transaction_state_log_min_isr=1)
    fill(broker, topic_name)
    broker.kill()
    segment = broker.data_dir / f"{topic_name}-0" / "00000000000000000000.log"
    with open(segment, "ab") as out:
        out.write(GARBAGE)  # a torn write: bytes past the last complete batch
    broker.start()
    logs = wait_for_line(broker, r"INFO loaded (\d+) logs \((\d+) bytes\) in [\d.]+ s; "
                                 r"(\d+) recovered after an unclean shutdown "
                                 r"\((\d+) bytes truncated from (\d+) of them\)")
    # the topic's 3, __consumer_offsets' 50, __transaction_state's 50
    assert int(logs.group(1)) == 103, logs.group(0)
    assert int(logs.group(4)) == len(GARBAGE) and int(logs.group(5)) == 1, logs.group(0)
    assert int(logs.group(3)) >= 3, logs.group(0)  # at least the logs holding records
    groups = wait_for_line(broker, r"INFO loaded (\d+) groups from (\d+) __consumer_offsets "
                                   r"records of 50 partitions in [\d.]+ s")
    assert int(groups.group(1)) == 1, groups.group(0)
    txns = wait_for_line(broker, r"INFO loaded (\d+) transactional ids from (\d+) "
                                 r"__transaction_state records of 50 partitions in [\d.]+ s")
    assert int(txns.group(1)) == 1, txns.group(0)
    text = start_log(broker)
    assert re.search(rf"WARNING {topic_name}-0: truncated {len(GARBAGE)} bytes of torn or "
                     r"corrupt data .*Nothing to do: a follower fetches them again", text), text
    assert "was not shut down cleanly" in text, text
    # no per-partition lines at INFO
    infos = [m.group(1) for m in map(INFO_LINE.match, text.splitlines()) if m]
    assert not [line for line in infos if re.search(r"partition \d+\b|-\d+ \(coordinator",
                                                    line)], infos
    assert len(infos) < 15, "\n".join(infos)


def test_a_clean_restart_says_no_recovery(broker_factory: BrokerFactory,
                                          topic_name: str) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name, partitions=2)
    broker.restart()
    line = wait_for_line(broker, r"INFO loaded 2 logs \(\d+ bytes\) in [\d.]+ s.*$").group(0)
    assert "recovered" not in line, line
    assert "not shut down cleanly" not in start_log(broker)
