"""A topic deleted while one of its brokers was down, then created again under the same
name: the returning broker must not take its old log for the new topic's. Kafka tells
them apart by topic id (KIP-516); partition.metadata holds the id of the log's topic."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster import SIZE, WAIT_S, Cluster, wait_for
from tests.cluster.operate import partition_dirs


def produce(cluster: Cluster, topic: str, values: list[bytes]) -> None:
    live = ",".join(cluster.brokers[b].bootstrap for b in cluster.live())
    producer = Producer({"bootstrap.servers": live, "acks": "all"})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(WAIT_S) == 0


def segment_bytes(cluster: Cluster, broker: int, topic: str) -> bytes:
    directory = cluster.brokers[broker].data_dir / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def test_broker_back_after_a_topic_was_recreated_drops_the_old_log(cluster: Cluster) -> None:
    topic = f"again-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, 1, replication=SIZE)
    produce(cluster, topic, [f"old-{i}".encode() for i in range(50)])
    cluster.wait_full_isr(topic, 1)
    away = next(b for b in sorted(cluster.brokers) if b != cluster.leader(topic, 0))
    wait_for(lambda: b"old-49" in segment_bytes(cluster, away, topic), WAIT_S,
             f"broker {away} to hold the old records")
    assert cluster.brokers[away].stop() == 0

    live = ",".join(cluster.brokers[b].bootstrap for b in cluster.live())
    admin = AdminClient({"bootstrap.servers": live})
    admin.delete_topics([topic])[topic].result(WAIT_S)
    wait_for(lambda: cluster.zk.exists(f"/brokers/topics/{topic}") is None, WAIT_S,
             "the topic's deletion")
    assert partition_dirs(cluster.brokers[away], topic) == {0}  # down: nobody told it

    cluster.restart(away)
    # the returning broker first in the assignment: it leads the new topic, so whatever
    # log it opens is what every consumer reads
    others = [b for b in sorted(cluster.brokers) if b != away]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1,
                                  replica_assignment=[[away, *others]])])[topic].result(
        WAIT_S)
    cluster.wait_full_isr(topic, 1)
    wait_for(lambda: cluster.leader(topic, 0) == away, WAIT_S, f"broker {away} to lead")
    produce(cluster, topic, [f"new-{i}".encode() for i in range(5)])
    assert read_all(cluster, topic) == [f"new-{i}".encode() for i in range(5)]
    assert b"old-" not in segment_bytes(cluster, away, topic)


def read_all(cluster: Cluster, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": topic,
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return values
                continue
            values.append(msg.value())
        raise AssertionError(f"no end of partition within {WAIT_S} s; read {len(values)}")
    finally:
        consumer.close()
