"""Flush policy on a live broker: the recovery point (and its checkpoint file)
moves only with flushes, which flush.messages / flush.ms trigger; flushes are
counted in pybroker_log_flushes_total."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from tests.conftest import free_port

from .helpers import assert_delivered, create_topic, produce_all, producer

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

CHECKPOINT_MS = "200"


def recovery_point(data_dir: Path, topic: str) -> int | None:
    path = data_dir / "recovery-point-offset-checkpoint"
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.rsplit(" ", 2)
        if (name, partition) == (topic, "0"):
            return int(offset)
    return None


def wait_recovery_point(data_dir: Path, topic: str, expected: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        got = recovery_point(data_dir, topic)
        if got == expected:
            return
        time.sleep(0.1)
    raise AssertionError(f"recovery point of {topic} is {got}, expected {expected}")


def produce(b: Broker, topic: str, count: int) -> None:
    p = producer(b.bootstrap, linger_ms=0, batch_num_messages=1)
    assert_delivered(produce_all(p, topic, [{"value": b"m%d" % i} for i in range(count)]))


def flushes_total(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("pybroker_log_flushes_total "):
                return float(line.split()[1])
    raise AssertionError("pybroker_log_flushes_total not exposed")


def test_default_leaves_flushing_to_the_os(broker_factory: BrokerFactory,
                                           topic_name: str) -> None:
    port = free_port()
    b = broker_factory({"log.flush.offset.checkpoint.interval.ms": CHECKPOINT_MS,
                        "metrics.port": port})
    create_topic(b.bootstrap, topic_name)
    produce(b, topic_name, 10)
    time.sleep(0.6)  # a few checkpoint writes
    assert recovery_point(b.data_dir, topic_name) == 0
    assert flushes_total(port) == 0
    b.stop()  # a clean shutdown flushes everything
    assert recovery_point(b.data_dir, topic_name) == 10


def test_flush_messages(broker_factory: BrokerFactory, topic_name: str) -> None:
    port = free_port()
    b = broker_factory({"log.flush.offset.checkpoint.interval.ms": CHECKPOINT_MS,
                        "metrics.port": port})
    create_topic(b.bootstrap, topic_name, config={"flush.messages": "4"})
    produce(b, topic_name, 10)  # one record per batch: flushes at 4 and 8
    wait_recovery_point(b.data_dir, topic_name, 8)
    assert flushes_total(port) == 2
    b.kill()
    b.start()  # recovery scans from the checkpointed point; nothing acknowledged is lost
    produce(b, topic_name, 2)
    wait_recovery_point(b.data_dir, topic_name, 12)


def test_flush_ms_scheduler(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory({"log.flush.offset.checkpoint.interval.ms": CHECKPOINT_MS,
                        "log.flush.scheduler.interval.ms": "100"})
    create_topic(b.bootstrap, topic_name, config={"flush.ms": "300"})
    produce(b, topic_name, 7)
    wait_recovery_point(b.data_dir, topic_name, 7)
