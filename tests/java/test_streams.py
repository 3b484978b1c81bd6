"""Kafka Streams' WordCountDemo (from the stock distribution's streams examples) with
processing.guarantee=exactly_once_v2 on a 3-broker pybroker cluster, through a kill -9
of the application and a kill -9 of a broker: read with isolation.level=read_committed,
each word's counts in the output topic are exactly 1, 2, ..., n (no count lost, none
repeated, none out of order), n being its occurrences in the input. Skipped without
KAFKA_HOME."""

from __future__ import annotations

import random
import struct
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.cluster.cluster import Cluster
from tests.java.kafka import App, requires_kafka, run_class, wait_until, write_properties

pytestmark = [requires_kafka, pytest.mark.timeout(900)]

INPUT = "streams-plaintext-input"    # the demo's fixed topic names
OUTPUT = "streams-wordcount-output"
WORDS = [f"w{i:02d}" for i in range(25)]
DEMO = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"


class OutputReader:
    """Everything committed to the output topic so far, in partition order."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": "read_committed", "auto.offset.reset": "earliest",
            "enable.auto.commit": False})
        self.consumer.subscribe([OUTPUT])
        self.counts: dict[str, list[int]] = {}
        self.total = 0

    def poll(self, seconds: float = 1.0) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            word = msg.key().decode()
            (count,) = struct.unpack(">q", msg.value())
            self.counts.setdefault(word, []).append(count)
            self.total += 1
        return self.total

    def close(self) -> None:
        self.consumer.close()


def produce_lines(bootstrap: str, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for line in lines:
        producer.produce(INPUT, value=line.encode())
    assert producer.flush(60) == 0


def test_wordcount_exactly_once_through_app_and_broker_kill(cluster: Cluster,
                                                           tmp_path: Path) -> None:
    b = cluster.bootstrap
    cluster.create_topic(INPUT, 2, 3)
    cluster.create_topic(OUTPUT, 2, 3)
    rng = random.Random(24)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(900)]
    expected = Counter(word for line in lines for word in line.split())
    props = write_properties(tmp_path / "wordcount.properties", {
        "bootstrap.servers": b, "application.id": "wordcount-eos",
        "processing.guarantee": "exactly_once_v2", "state.dir": str(tmp_path / "state"),
        "replication.factor": "3", "commit.interval.ms": "300",
        # a killed instance leaves the group in seconds, not Kafka's default 45 s
        "session.timeout.ms": "10000", "heartbeat.interval.ms": "1000",
        "consumer.session.timeout.ms": "10000"})
    demo = run_class(DEMO, str(props), log_path=tmp_path / "wordcount.log")
    reader = OutputReader(b)
    running: list[App] = [demo]
    try:
        produce_lines(b, lines[:300])
        demo.start()
        wait_until(lambda: reader.poll() >= 100, 120, "the first committed counts",
                   on_timeout=demo.log_tail)
        demo.kill()                                  # kill -9 mid-stream
        produce_lines(b, lines[300:600])
        before = reader.poll()
        demo.start()
        wait_until(lambda: reader.poll() >= before + 200, 180,
                   "counts after the application restart", on_timeout=demo.log_tail)
        cluster.kill(1)                              # kill -9 a broker under the app
        produce_lines(",".join(cluster.brokers[i].bootstrap for i in cluster.live()),
                      lines[600:])
        cluster.restart(1)
        want = sum(expected.values())
        wait_until(lambda: reader.poll() >= want, 300, f"all {want} committed counts",
                   on_timeout=lambda: f"{reader.total} read\n" + demo.log_tail(40))
        reader.poll(3.0)  # nothing more may come: a repeated count would show here
    finally:
        for proc in running:
            proc.kill()
        reader.close()
    for word, n in expected.items():
        assert reader.counts.get(word) == list(range(1, n + 1)), (word, n, reader.counts.get(word))
    assert set(reader.counts) == set(expected)
