"""MirrorMaker 2 (connect-mirror-maker.sh of a stock distribution) between two pybroker
instances, A -> B: topic `orders` on A is replicated to `A.orders` on B record for record,
and a consumer group's committed offsets on A are translated through the offset syncs
and checkpoints and written to the same group on B (sync.group.offsets), so a consumer
moving to B resumes where it left off on A. Skipped without KAFKA_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerFactory
from tests.java.kafka import App, app, requires_kafka, wait_until, write_properties

pytestmark = [requires_kafka, pytest.mark.timeout(600)]

TOPIC = "orders"
GROUP = "billing"
COUNTS = {0: 300, 1: 200}
COMMITTED = {0: 120, 1: 75}  # the group's position on A after the first records


def read_all(bootstrap: str, topic: str, partition: int, end: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-test-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []

    def more() -> bool:
        values.extend(m.value() for m in consumer.consume(100, 1.0) if not m.error())
        return len(values) >= end
    try:
        wait_until(more, 60, f"{end} records of {topic}-{partition}", poll=0)
    finally:
        consumer.close()
    return values


def committed(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in COUNTS], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in offsets if tp.offset >= 0}


def produce(bootstrap: str, ranges: dict[int, range]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition, offsets in ranges.items():
        for i in offsets:
            producer.produce(TOPIC, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(60) == 0


def commit(bootstrap: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-test-watermarks"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                for p in COUNTS}
    except Exception:
        return {}
    finally:
        c.close()


def test_mirror_topic_and_translate_group_offsets(broker_factory: BrokerFactory,
                                                  tmp_path: Path) -> None:
    a, b = broker_factory(), broker_factory()
    admin_a = AdminClient({"bootstrap.servers": a.bootstrap})
    admin_a.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])[
        TOPIC].result(30)
    props = write_properties(tmp_path / "mm2.properties", {
        "clusters": "A, B", "A.bootstrap.servers": a.bootstrap,
        "B.bootstrap.servers": b.bootstrap, "A->B.enabled": "true", "A->B.topics": TOPIC,
        "B->A.enabled": "false", "replication.factor": "1",
        **{f"{t}.replication.factor": "1" for t in (
            "checkpoints.topic", "heartbeats.topic", "offset-syncs.topic",
            "offset.storage", "status.storage", "config.storage")},
        "refresh.topics.interval.seconds": "2", "refresh.groups.interval.seconds": "2",
        "emit.checkpoints.interval.seconds": "1", "emit.heartbeats.interval.seconds": "1",
        "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
        # an offset sync for every record (the latest one is always kept), so a group
        # at the replicated end translates exactly
        "offset.lag.max": "0"})
    mm2 = app("connect-mirror-maker.sh", str(props), log_path=tmp_path / "mm2.log")
    running: list[App] = [mm2.start()]
    remote = f"A.{TOPIC}"
    try:
        # phase 1: the group's consumer on A is at the end of what was replicated
        produce(a.bootstrap, {p: range(n) for p, n in COMMITTED.items()})
        wait_until(lambda: high_watermarks(b.bootstrap, remote) == COMMITTED, 240,
                   f"{remote} on B to hold the first records", on_timeout=mm2.log_tail)
        commit(a.bootstrap, COMMITTED)
        wait_until(lambda: committed(b.bootstrap, remote) == COMMITTED, 180,
                   f"group {GROUP}'s offsets translated onto B",
                   on_timeout=lambda: f"{committed(b.bootstrap, remote)}\n" + mm2.log_tail())

        # phase 2: more records, and the group moves on to the end on A
        produce(a.bootstrap, {p: range(COMMITTED[p], n) for p, n in COUNTS.items()})
        wait_until(lambda: high_watermarks(b.bootstrap, remote) == COUNTS, 240,
                   f"{remote} on B to hold every record", on_timeout=mm2.log_tail)
        for partition, n in COUNTS.items():
            assert read_all(b.bootstrap, remote, partition, n) == [
                f"{partition}-{i}".encode() for i in range(n)]
        commit(a.bootstrap, COUNTS)
        wait_until(lambda: committed(b.bootstrap, remote) == COUNTS, 180,
                   f"group {GROUP}'s new offsets translated onto B",
                   on_timeout=lambda: f"{committed(b.bootstrap, remote)}\n" + mm2.log_tail())
        admin_b = AdminClient({"bootstrap.servers": b.bootstrap})
        topics = admin_b.list_topics(timeout=30).topics
        assert {"heartbeats", "A.checkpoints.internal"} <= set(topics)
    finally:
        for proc in running:
            proc.stop(60)
