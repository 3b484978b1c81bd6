"""A fetch reads its partitions a slice at a time, letting other requests in between
(issue 25: a follower's fetch over thousands of partitions held the event loop):
every requested partition is read once, in order, and a topic cut between slices is
answered as one topic, also by a real broker to a real consumer."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pybroker.handlers.fetch import CONTINUED, READ_SLICE_PARTITIONS, slices
from tests.conftest import Broker


def topic(name: str, n: int) -> dict[str, object]:
    return {"topic": name, "topic_id": name.upper(),
            "partitions": [{"partition": i} for i in range(n)]}


def test_slices_cut_big_topics_and_keep_the_order() -> None:
    asked = [topic("a", 3), topic("b", 0), topic("c", 9), topic("d", 2)]
    pieces = list(slices(asked, 4))
    assert all(sum(len(t["partitions"]) for t in p) <= 4 for p in pieces)
    flat = [(t["topic"], p["partition"]) for piece in pieces for t in piece
            for p in t["partitions"]]
    assert flat == [(t["topic"], p["partition"]) for t in asked for p in t["partitions"]]
    # every entry of a cut topic after its first continues it; the others are as asked
    entries = [t for piece in pieces for t in piece]
    assert [(t["topic"], bool(t.get(CONTINUED))) for t in entries] == [
        ("a", False), ("b", False), ("c", False), ("c", True), ("c", True), ("d", False)]
    assert all(t["topic_id"] == t["topic"].upper() for t in entries)
    assert entries[0] is asked[0] and entries[1] is asked[1]  # whole topics are not copied
    assert list(slices([], 4)) == []


def test_a_consumer_reads_every_partition_of_a_topic_larger_than_a_slice(
        broker: Broker) -> None:
    partitions = READ_SLICE_PARTITIONS * 2 + 7
    name = f"slices-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(partitions):
        producer.produce(name, value=f"v{i}".encode(), partition=i)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([name])
    got: dict[int, list[bytes]] = {}
    deadline = time.monotonic() + 90
    try:
        while sum(len(v) for v in got.values()) < partitions:
            assert time.monotonic() < deadline, f"read {len(got)} of {partitions} partitions"
            for message in consumer.consume(500, timeout=1.0):
                assert message.error() is None, message.error()
                got.setdefault(message.partition(), []).append(message.value())
    finally:
        consumer.close()
    assert got == {i: [f"v{i}".encode()] for i in range(partitions)}
