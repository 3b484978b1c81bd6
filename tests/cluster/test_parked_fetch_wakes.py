"""The acks=all path is woken, never timed: with every Fetch parked at the log end (both
followers' and a consumer's), an acks=all record is acknowledged and consumed long before
any of them would have timed out.

As Kafka completes delayed fetches: the leader's append completes its followers' parked
Fetches (replica.fetch.min.bytes is reached), and the high watermark moving when the last
of them comes back for more completes the consumer's parked Fetch and the waiting acks=all
answer. A Fetch answered only at its max wait would show here as seconds per record
(issue 26: the end-to-end p99 at 5,000 records/s is a few ms, one round of these)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.zookeeper import ZooKeeperServer, zookeeper  # noqa: F401 - fixture

#: every Fetch's max wait: the followers' (replica.fetch.wait.max.ms) and the consumer's
#: (fetch.wait.max.ms); long, so that a loaded machine's slow round is still far inside it
MAX_WAIT_MS = 15_000
#: ... and below replica.lag.time.max.ms (Kafka's default here), so that a follower parked
#: at the log end stays in sync
LAG_TIME_MAX_MS = 30_000
#: a record woken through must be acknowledged and consumed well within one max wait
BOUND_S = MAX_WAIT_MS / 1000 / 2
ROUNDS = 3
PARKED = 'pybroker_purgatory_size{operation="fetch"}'


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path,  # noqa: F811
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from cluster_fixture(zookeeper, tmp_path, request, metrics=True,
                               overrides={"replica.fetch.wait.max.ms": MAX_WAIT_MS,
                                          "replica.lag.time.max.ms": LAG_TIME_MAX_MS})


def test_parked_fetches_are_woken_by_the_append_and_the_high_watermark(
        cluster: Cluster) -> None:
    cluster.create_topic("woken", 1, 3, {"min.insync.replicas": "2"})
    leader = cluster.leader("woken", 0)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "woken",
                         "enable.auto.commit": False, "fetch.wait.max.ms": MAX_WAIT_MS})
    consumer.assign([TopicPartition("woken", 0, OFFSET_BEGINNING)])
    try:
        def acked(value: bytes) -> float:
            """Seconds from produce() to the record's acknowledgement."""
            done: list[float] = []
            start = time.monotonic()
            producer.produce("woken", value, on_delivery=lambda err, _m: done.append(
                time.monotonic() if err is None else -1.0))
            producer.flush(WAIT_S)
            assert done and done[0] > 0, f"{value!r} not acknowledged"
            return done[0] - start

        def consumed(value: bytes, start: float) -> float:
            """Seconds from `start` until the consumer has the record."""
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                message = consumer.poll(0.05)
                if message is not None and message.error() is None \
                        and message.value() == value:
                    return time.monotonic() - start
            raise AssertionError(f"{value!r} not consumed within {WAIT_S}s")

        # the first acknowledgement of a new partition may take a follower's backoff
        acked(b"warm-up")
        consumed(b"warm-up", time.monotonic())
        for n in range(ROUNDS):
            # both followers' Fetches and the consumer's parked at the log end
            wait_for(lambda: cluster.metrics(leader).get(PARKED, 0) >= 3, WAIT_S,
                     "every Fetch parked on the leader")
            value = f"record-{n}".encode()
            start = time.monotonic()
            ack_s = acked(value)
            seen_s = consumed(value, start)
            assert ack_s < BOUND_S, (
                f"{value!r} acknowledged after {ack_s:.2f}s: the followers' parked Fetches "
                f"were not answered at the append, or the high watermark's move did not "
                f"wake the answer (the followers' max wait is {MAX_WAIT_MS} ms)")
            assert seen_s < BOUND_S, (
                f"{value!r} consumed after {seen_s:.2f}s: the consumer's parked Fetch was "
                f"not answered when the high watermark moved (max wait {MAX_WAIT_MS} ms)")
    finally:
        consumer.close()
