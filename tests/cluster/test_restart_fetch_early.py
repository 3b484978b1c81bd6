"""A restarted broker's followers fetch before it is registered (issue 25): once its
logs are open and its topics' states applied, it copies what it missed while its
registration is still to come, so catching up overlaps the start instead of following
it. Its leaders take it into the ISR only once it is registered (as KRaft's leaders do
not take in a fenced broker, KIP-841).

The registration is held back by a znode the test holds at /brokers/ids/3 (another
session's, with no endpoint the brokers can read, so no broker counts it as live): the
restarted broker waits for it as for any other holder."""

from __future__ import annotations

import json
import threading

from confluent_kafka import Producer
from kazoo.client import KazooClient

from tests.cluster.cluster import Cluster, wait_for

TOPIC = "early"
PARTITIONS = 3
BEFORE, WHILE_DOWN = 20, 30
#: the restarted broker waits for the held registration 1.5 x its session timeout: long
#: enough for this test's checks on a loaded machine
RESTARTED_SESSION_TIMEOUT_MS = 60_000


def _produce(cluster: Cluster, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    failed: list[str] = []
    for i in range(start, start + count):
        producer.produce(TOPIC, f"r{i}".encode(), partition=i % PARTITIONS,
                         on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
    assert producer.flush(30) == 0
    assert not failed, failed[:3]


def test_a_restarted_broker_fetches_before_it_is_registered(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    cluster.wait_full_isr(TOPIC, PARTITIONS)
    _produce(cluster, 0, BEFORE)
    target = cluster.brokers[3]
    target.stop()
    wait_for(lambda: all(3 not in cluster.isr(TOPIC, p) for p in range(PARTITIONS)),
             what="broker 3 out of every ISR")
    _produce(cluster, BEFORE, WHILE_DOWN)  # what the restarted broker has to fetch
    leader_bytes = {p: cluster.log_bytes(cluster.leader(TOPIC, p), TOPIC, p)
                    for p in range(PARTITIONS)}

    holder = KazooClient(hosts=cluster.zookeeper.address + cluster.chroot, timeout=10.0)
    holder.start(timeout=30)
    try:
        holder.create("/brokers/ids/3", json.dumps({"version": 5, "endpoints": []}).encode(),
                      ephemeral=True)
        target.overrides["zookeeper.session.timeout.ms"] = str(RESTARTED_SESSION_TIMEOUT_MS)
        started: list[BaseException | None] = []

        def start() -> None:
            try:
                target.start(ready_timeout=RESTARTED_SESSION_TIMEOUT_MS / 1000 * 2)
                started.append(None)
            except BaseException as exc:  # noqa: BLE001 - reported by the test thread
                started.append(exc)

        starter = threading.Thread(target=start, daemon=True)
        starter.start()
        # every record reaches the restarted broker's logs while the registration at
        # /brokers/ids/3 is still the test's (not the broker's)
        wait_for(lambda: all(cluster.log_bytes(3, TOPIC, p) == leader_bytes[p]
                             for p in range(PARTITIONS)),
                 what="broker 3's logs caught up before it registered")
        _, stat = cluster.zk.get("/brokers/ids/3")
        assert stat.ephemeralOwner == holder.client_id[0]
        assert all(3 not in cluster.isr(TOPIC, p) for p in range(PARTITIONS))
    finally:
        holder.stop()
        holder.close()
    starter.join(RESTARTED_SESSION_TIMEOUT_MS / 1000 * 2 + 10)
    assert started == [None], started
    cluster.wait_full_isr(TOPIC, PARTITIONS)
