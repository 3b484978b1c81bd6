"""A broker restarted under the same id with many partitions (issue 25): after a kill -9
it opens and recovers every log, rejoins every ISR, and then serves every partition
alone, with every record acknowledged (acks=all) before the kill.

Serving is shown with a real client: once the restarted broker is back in every ISR,
the other two are killed, so it leads every partition, and a consumer reads each one
from it."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster.cluster import Cluster, wait_for

TOPICS = 3
PARTITIONS = 20  # a topic: 60 partitions, 180 replicas
RECORDS = 5  # a partition
WAIT_S = 90.0


def _produce_everywhere(cluster: Cluster, topics: list[str]) -> dict[tuple[str, int], list[bytes]]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    acked: dict[tuple[str, int], list[bytes]] = {}
    failed: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.setdefault((msg.topic(), msg.partition()), []).append(msg.value())  # type: ignore[attr-defined]

    for topic in topics:
        for partition in range(PARTITIONS):
            for i in range(RECORDS):
                producer.produce(topic, f"{topic}:{partition}:{i}".encode(),
                                 partition=partition, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert not failed, failed[:5]
    return acked


def _read(bootstrap: str, topic: str, partition: int, expected: int) -> list[bytes]:
    """The partition's records from its log start up to the high watermark, once that
    is at least `expected` records past the start (a new leader's high watermark moves
    up when its ISR has shrunk to the live replicas)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 100})
    tp = TopicPartition(topic, partition)

    def watermarks() -> tuple[int, int] | None:
        low, high = consumer.get_watermark_offsets(tp, timeout=5)
        return (low, high) if high - low >= expected else None

    try:
        low, high = wait_for(watermarks, WAIT_S, f"{expected} records in {topic}-{partition}")
        consumer.assign([TopicPartition(topic, partition, low)])
        values: list[bytes] = []
        wait_for(lambda: values.extend(m.value() for m in consumer.consume(100, timeout=1.0)
                                       if m.error() is None) or len(values) >= high - low,
                 WAIT_S, f"{high - low} records of {topic}-{partition}")
        return values
    finally:
        consumer.close()


@pytest.mark.timeout(600)
def test_killed_broker_with_many_partitions_rejoins_and_serves_them_all(
        cluster: Cluster) -> None:
    topics = [f"many-{i}" for i in range(TOPICS)]
    for topic in topics:
        cluster.create_topic(topic, PARTITIONS)
    acked = _produce_everywhere(cluster, topics)
    assert len(acked) == TOPICS * PARTITIONS

    victim = max(b for b in cluster.brokers if b != cluster.controller())
    cluster.kill(victim)
    every = [(t, p) for t in topics for p in range(PARTITIONS)]
    wait_for(lambda: all(victim not in cluster.isr(t, p) for t, p in every), WAIT_S,
             f"broker {victim} out of every ISR")
    cluster.restart(victim)
    wait_for(lambda: all(victim in cluster.isr(t, p) for t, p in every), WAIT_S,
             f"broker {victim} back in every ISR")

    # it alone is left: it leads every partition and must serve every acknowledged record
    for other in [b for b in cluster.brokers if b != victim]:
        cluster.kill(other)
    wait_for(lambda: all(cluster.leader(t, p) == victim for t, p in every), WAIT_S,
             f"broker {victim} leading every partition")
    bootstrap = cluster.brokers[victim].bootstrap
    for topic, partition in every:
        want = acked[(topic, partition)]
        assert _read(bootstrap, topic, partition, len(want)) == want, (topic, partition)
