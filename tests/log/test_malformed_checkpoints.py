"""A checkpoint file that is there but unreadable, found at a start: the broker does what
Kafka does per file instead of stopping with a traceback. Recovery points, log start
offsets and cleaner offsets are reset with a warning (the logs are recovered in full, and
every acknowledged record is still read back); unreadable high watermarks refuse the
start with one line that says what to do, as Kafka takes such a dir offline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS)]
from integration.helpers import create_topic  # noqa: E402

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

WAIT_S = 60.0
RECORDS = 40
GARBAGE = "0\n2\nnot a checkpoint line\n"
RESET_FILES = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
               "cleaner-offset-checkpoint")


def produce_acknowledged(broker: Broker, topic: str) -> list[bytes]:
    create_topic(broker.bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    acked: list[bytes] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        acked.append(msg.value())  # type: ignore[attr-defined]

    for i in range(RECORDS):
        producer.produce(topic, value=b"r%d" % i, partition=i % 2, on_delivery=on_delivery)
    assert producer.flush(WAIT_S) == 0
    return acked


def read_all(broker: Broker, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "malformed-cp",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(int(WAIT_S * 2)):
            for msg in consumer.consume(RECORDS, timeout=0.5):
                if msg.error() is None:
                    values.append(msg.value())
            if len(values) >= expected:
                break
    finally:
        consumer.close()
    return values


def test_unreadable_reset_checkpoints_are_reset_and_nothing_is_lost(
        broker_factory: BrokerFactory, topic_name: str) -> None:
    broker = broker_factory()
    acked = produce_acknowledged(broker, topic_name)
    broker.kill()
    for name in RESET_FILES:
        (broker.data_dir / name).write_text(GARBAGE)
    broker.start()
    log_text = broker.log_path.read_text().rsplit("===== start", 1)[-1]
    assert "Traceback" not in log_text, log_text
    for name in RESET_FILES:
        assert f"WARNING {broker.data_dir / name}: not a checkpoint file" in log_text, log_text
    assert "every log in the dir is recovered from its first segment" in log_text, log_text
    assert sorted(read_all(broker, topic_name, len(acked))) == sorted(acked)


@pytest.mark.parametrize("content", [GARBAGE, "0\n1\n"], ids=["bad-line", "truncated"])
def test_unreadable_high_watermarks_refuse_the_start_with_one_line(
        broker_factory: BrokerFactory, topic_name: str, content: str) -> None:
    broker = broker_factory()
    produce_acknowledged(broker, topic_name)
    broker.kill()
    checkpoint = broker.data_dir / "replication-offset-checkpoint"
    checkpoint.write_text(content)
    with pytest.raises(RuntimeError, match="exited with 1 during startup") as failed:
        broker.start()
    message = str(failed.value)
    assert "Traceback" not in message, message
    assert f"pybroker: {checkpoint}: not a checkpoint file" in message, message
    assert "move it aside" in message, message
    # what the line says to do works, and the records are all there
    checkpoint.rename(checkpoint.with_name("replication-offset-checkpoint.bad"))
    broker.start()
    assert len(read_all(broker, topic_name, RECORDS)) == RECORDS
