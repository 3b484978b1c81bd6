"""A leader cut from the other brokers but not from ZooKeeper nor from its clients
(issue 25): every broker's inter-broker listener is reached through a proxy
(Cluster(replication_proxied=True)), clients and ZooKeeper reach it directly.

- "freeze": its followers' fetches (and the controller's look at it) get no
  answer. Nothing proves it dead, so it stays leader; its followers fall out of
  its ISR after replica.lag.time.max.ms and acks=all is refused below
  min.insync.replicas, as with Kafka.
- "refuse": its inter-broker listener refuses connections while the process is
  alive and still leads: exactly what the controller takes for a dead process.
  This is the faster detection being wrong: the controller fences the live
  leader and elects another, while clients go on writing to the old one.

Either way, a client writing straight to the cut-off leader throughout may be
refused or time out, but every acks=all write anyone acknowledged must be found
afterwards, at the offset it was acknowledged with."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.proxy import Mode
from tests.cluster.scenario import (
    PARTITIONS,
    TOPIC_CONFIGS,
    assert_nothing_lost,
    start_producers,
)
from tests.cluster.test_zookeeper_loss import produce_to
from tests.cluster.zookeeper import ZooKeeperServer

NOT_LEADER_OR_FOLLOWER = 6
#: how long the leader stays cut off (longer than the tests' replica.lag.time.max.ms)
CUT_S = 12.0


@pytest.fixture
def replication_proxied(zookeeper: ZooKeeperServer, tmp_path: Path,
                        request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from cluster_fixture(zookeeper, tmp_path, request, replication_proxied=True)


class DirectWriter:
    """Writes acks=all records straight to one broker from a thread, one at a time,
    and keeps what it was told."""

    def __init__(self, cluster: Cluster, broker_id: int, topic: str, partition: int) -> None:
        self.cluster, self.broker_id = cluster, broker_id
        self.topic, self.partition = topic, partition
        self.acknowledged: list[tuple[int, bytes]] = []
        self.answers: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="direct-writer")

    def start(self) -> DirectWriter:
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            value = f"direct:{i}".encode()
            i += 1
            try:
                code, offset = produce_to(self.cluster, self.broker_id, self.topic,
                                          self.partition, value, timeout_ms=1000)
            except OSError:
                code, offset = -1, -1
            self.answers[code] = self.answers.get(code, 0) + 1
            if code == 0:
                self.acknowledged.append((offset, value))
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)


@pytest.mark.parametrize("mode", ["freeze", "refuse"])
def test_leader_cut_from_its_followers_acknowledges_nothing_that_is_lost(
        replication_proxied: Cluster, mode: Mode) -> None:
    cluster = replication_proxied
    topic = "cutoff"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    controller = cluster.controller()
    # "refuse" on the controller: the others take it for dead too and elect another
    partition = next(p for p in range(PARTITIONS)
                     if (cluster.leader(topic, p) == controller) == (mode == "refuse"))
    victim = cluster.leader(topic, partition)
    history = cluster.watch_isr(topic, PARTITIONS)

    writer = DirectWriter(cluster, victim, topic, partition).start()
    cluster.replication_proxies[victim].cut(mode)
    cut_at = time.monotonic()
    try:
        if mode == "refuse":
            # taken for dead: the partition moves while the old leader lives on
            moved_to = cluster.wait_leader_not(topic, partition, victim, WAIT_S)
            assert victim in cluster.registered()
            wait_for(lambda: cluster.controller() not in (None, victim), WAIT_S,
                     "another controller")
            # the old leader hears of it through ZooKeeper and stops leading
            wait_for(lambda: produce_to(cluster, victim, topic, partition, b"probe")[0]
                     == NOT_LEADER_OR_FOLLOWER, WAIT_S,
                     f"broker {victim} to answer NOT_LEADER_OR_FOLLOWER")
            for producer in producers:
                producer.wait_acked(20, WAIT_S, partition=partition)
        else:
            # alive as far as anyone can tell: it stays leader, its ISR shrinks
            wait_for(lambda: cluster.isr(topic, partition) == [victim], WAIT_S,
                     f"the ISR of {topic}-{partition} to shrink to broker {victim}")
            moved_to = victim
        time.sleep(max(0.0, CUT_S - (time.monotonic() - cut_at)))  # the writer goes on
    finally:
        cluster.replication_proxies[victim].restore()
        writer.stop()
    print(f"{mode}: broker {victim} cut from the other brokers for {CUT_S}s; partition "
          f"{partition} led by {moved_to}; the direct writer was answered {writer.answers}, "
          f"{len(writer.acknowledged)} acknowledged; ISRs seen {history[partition]}")

    cluster.wait_full_isr(topic, PARTITIONS)
    for producer in producers:
        producer.wait_acked(20, WAIT_S, partition=partition)
    found = dict(cluster.read_partition(topic, partition))
    missing = [(o, v) for o, v in writer.acknowledged if found.get(o) != v]
    assert not missing, f"acknowledged by the cut-off leader but missing: {missing[:10]}"
    assert_nothing_lost(cluster, topic, producers)
    wait_for(lambda: len({cluster.log_bytes(b, topic, partition) for b in cluster.brokers}) == 1,
             WAIT_S, f"identical logs of {topic}-{partition}")
