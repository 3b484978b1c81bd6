"""The broker's WARNING and ERROR lines say what happened, with the paths and ids
involved, and what the operator should do, or that nothing is needed (issue 27). Each
test makes a real broker hit one (a log dir that fails, a stray log of an earlier topic
found at a start) and reads the line from the broker's own log. The torn tail's line is
checked in test_startup_log.py."""

from __future__ import annotations

import base64
import re
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Producer

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS)]
from integration.helpers import create_topic  # noqa: E402

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

WAIT_S = 60.0


def start_log(broker: Broker) -> str:
    """The log of the broker's latest start."""
    return broker.log_path.read_text().rsplit("===== start", 1)[-1]


def wait_for_line(broker: Broker, pattern: str) -> str:
    """The first line of the latest start's log matching `pattern`, waited for."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = re.search(pattern, start_log(broker), re.MULTILINE)
        if found:
            return found.group(0)
        assert time.monotonic() < deadline, f"no {pattern!r} in:\n{start_log(broker)}"
        time.sleep(0.2)


def test_a_failed_log_dir_says_to_check_the_disk_and_restart(broker_factory: BrokerFactory,
                                                             topic_name: str) -> None:
    broker = broker_factory(log_flush_offset_checkpoint_interval_ms=200)
    create_topic(broker.bootstrap, topic_name, partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic_name, value=b"v")
    assert producer.flush(WAIT_S) == 0
    # the checkpoint's temporary file cannot be written: its name is taken by a dir (as
    # root, permissions would not stop the write; a full disk needs a mount)
    (broker.data_dir / "recovery-point-offset-checkpoint.tmp").mkdir()
    data_dir = re.escape(str(broker.data_dir))
    line = wait_for_line(broker, rf"^.* ERROR log dir {data_dir} failed \(.*$")
    assert "IsADirectoryError" in line or "Is a directory" in line, line
    assert "is now offline" in line and "KAFKA_STORAGE_ERROR" in line, line
    assert "Check the disk" in line and "restart the broker" in line, line
    # its only dir: the broker stops, and says what to do first
    last = wait_for_line(broker, r"^.* ERROR shutting down: every log dir .*$")
    assert str(broker.data_dir) in last and "then start the broker again" in last, last
    assert broker.proc is not None
    broker.proc.wait(WAIT_S)


def test_a_stray_log_of_an_earlier_topic_says_nothing_is_needed(
        broker_factory: BrokerFactory, topic_name: str) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name, partitions=1)
    broker.stop()
    # the dir as a topic of the same name, deleted and created again while this broker
    # was down, would have left it: its partition.metadata names another topic id
    directory = broker.data_dir / f"{topic_name}-0"
    metadata = directory / "partition.metadata"
    current = re.search(r"topic_id: (\S+)", metadata.read_text())
    assert current is not None
    earlier = uuid.uuid4()
    encoded = base64.urlsafe_b64encode(earlier.bytes).decode().rstrip("=")
    metadata.write_text(f"version: 0\ntopic_id: {encoded}\n")
    broker.start()
    line = wait_for_line(broker, rf"^.* WARNING deleting {re.escape(str(directory))}: .*$")
    assert f"an earlier topic named {topic_name}" in line, line
    assert "Nothing to do" in line, line
