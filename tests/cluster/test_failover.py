"""Leader failover on a 3-broker cluster (issue 12): kill -9 a partition leader under
continuous acks=all produce, then bring it back.

Every acknowledged record is counted against what is read back: none may be
lost, the order of each partition holds, and the idempotent producer's records
are there exactly once."""

from __future__ import annotations

import os
import time

import pytest

from tests.cluster.cluster import WAIT_S, Cluster, wait_for
from tests.cluster.scenario import (
    FAILOVER_S,
    PARTITIONS,
    TOPIC_CONFIGS,
    assert_nothing_lost,
    start_producers,
    wait_served,
)
from tests.integration.rawclient import RawClient, Rec, build_batch


def test_killed_leader_is_replaced_and_no_acknowledged_record_is_lost(
        cluster: Cluster) -> None:
    topic = "failover"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    victim = cluster.leader(topic, 0)

    cluster.kill(victim)
    killed_at = time.monotonic()
    new_leader = cluster.wait_leader_not(topic, 0, victim, FAILOVER_S)
    assert cluster.isr(topic, 0) == sorted(set(cluster.brokers) - {victim})
    # a new leader serves: writes to the partition are acknowledged again within the bound
    failover_s = wait_served(producers, 0, killed_at)
    print(f"killed broker {victim}; broker {new_leader} acknowledged after {failover_s:.1f}s")
    for producer in producers:
        producer.wait_acked(20, WAIT_S, partition=0)
    assert new_leader != victim

    totals = assert_nothing_lost(cluster, topic, producers)
    assert all(count > 100 for count in totals.values()), totals


def test_restarted_leader_truncates_catches_up_and_rejoins_the_isr(cluster: Cluster) -> None:
    topic = "rejoin"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    victim = cluster.leader(topic, 0)
    followers = [b for b in cluster.brokers if b != victim]

    # Give the doomed leader a tail its followers never get: pause them (shorter than
    # their ZooKeeper session), append with acks=1 straight to the leader, kill it.
    # A fetch the followers sent before they stopped may still be answered: the
    # sentinel append answers it, so nothing after the sentinel can reach them.
    for follower in followers:
        cluster.pause(follower)
    try:
        with RawClient(cluster.brokers[victim].bootstrap) as raw:
            assert raw.produce(topic, 0, build_batch([Rec(b"sentinel")]), acks=1).error_code == 0
            for i in range(5):
                batch = build_batch([Rec(f"tail:{i}".encode()) for _ in range(10)])
                answer = raw.produce(topic, 0, batch, acks=1)
                assert answer.error_code == 0, answer
        cluster.kill(victim)
    finally:
        for follower in followers:
            cluster.resume(follower)
    cluster.wait_leader_not(topic, 0, victim)
    for producer in producers:
        producer.wait_acked(30, WAIT_S, partition=0)

    cluster.restart(victim)
    cluster.wait_full_isr(topic, PARTITIONS)
    # what an operator sees: Kafka's describe lines, the restarted broker back in every ISR
    described = wait_for(
        lambda: (lambda d: d if all(sorted(p["isr"]) == [1, 2, 3] for p in d.values())
                 else None)(
            cluster.describe(topic)),
        WAIT_S, "describe to show full ISRs")
    assert sorted(described) == list(range(PARTITIONS))
    for partition, info in described.items():
        assert info["replicas"] and sorted(info["replicas"]) == [1, 2, 3], info["line"]
        assert info["leader"] == cluster.leader(topic, partition), info["line"]
        assert f"\tLeader: {info['leader']}\tReplicas: " in info["line"]

    totals = assert_nothing_lost(cluster, topic, producers)
    assert all(count > 50 for count in totals.values()), totals
    # the acks=1 tail the followers never had is gone, and every replica holds the
    # same bytes (same offsets, epochs, batches) once the followers have fetched the end
    for partition in range(PARTITIONS):
        def identical(p: int = partition) -> bool:
            logs = {b: cluster.log_bytes(b, topic, p) for b in cluster.brokers}
            return len(set(logs.values())) == 1
        wait_for(identical, WAIT_S, f"identical logs of {topic}-{partition}")
    assert b"tail:" not in cluster.log_bytes(victim, topic, 0)


#: kill/restart cycles of the repeat test (about 7 s each; PYBROKER_FAILOVER_CYCLES=3: quicker)
CYCLES = int(os.environ.get("PYBROKER_FAILOVER_CYCLES", "10"))


@pytest.mark.timeout(90 + 40 * CYCLES)
def test_repeated_kill_and_restart_loses_nothing(cluster: Cluster) -> None:
    """Kill -9 a partition leader, wait for the new one to serve, restart the dead
    broker and wait for it to rejoin every ISR; again and again, over the partitions
    in turn, under continuous produce. Then count acknowledged against found."""
    topic = "cycles"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    timings = []
    for cycle in range(CYCLES):
        partition = cycle % PARTITIONS
        victim = cluster.leader(topic, partition)
        cluster.kill(victim)
        killed_at = time.monotonic()
        cluster.wait_leader_not(topic, partition, victim, FAILOVER_S)
        failover_s = wait_served(producers, partition, killed_at)
        cluster.restart(victim)
        cluster.wait_full_isr(topic, PARTITIONS)
        timings.append((victim, partition, failover_s, time.monotonic() - killed_at))
    totals = assert_nothing_lost(cluster, topic, producers)
    for cycle, (victim, partition, failover_s, total_s) in enumerate(timings):
        print(f"cycle {cycle}: killed broker {victim} (leader of {topic}-{partition}); "
              f"acknowledged again after {failover_s:.1f}s, back in every ISR after "
              f"{total_s:.1f}s")
    print(f"acknowledged and found: {totals}")
