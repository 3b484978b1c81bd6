"""Too few replicas (issue 12): with two of three brokers dead, a partition's ISR is
its one live replica, below min.insync.replicas=2. acks=all produce must fail with
NOT_ENOUGH_REPLICAS rather than be acknowledged with one copy, and resume once a
second replica is back in the ISR."""

from __future__ import annotations

import time

from tests.cluster.cluster import WAIT_S, Cluster, wait_for
from tests.cluster.scenario import (
    PARTITIONS,
    TOPIC_CONFIGS,
    assert_nothing_lost,
    start_producers,
)
from tests.integration.rawclient import RawClient, Rec, build_batch

NOT_ENOUGH_REPLICAS = 19


def test_acks_all_refused_below_min_insync_then_resumes(cluster: Cluster) -> None:
    topic = "minisr"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    survivor = cluster.controller()
    assert survivor is not None
    doomed = [b for b in cluster.brokers if b != survivor]
    for broker_id in doomed:
        cluster.kill(broker_id)
    killed_at = time.monotonic()

    # the controller gives every partition to the survivor, alone in the ISR
    wait_for(lambda: all(cluster.state(topic, p)["leader"] == survivor
                         and cluster.isr(topic, p) == [survivor] for p in range(PARTITIONS)),
             WAIT_S, f"every partition led by broker {survivor} alone")
    acked_at_shrink = {p.tag: p.acked_count() for p in producers}

    # acks=all is refused with NOT_ENOUGH_REPLICAS; acks=1 is still taken (Kafka's rule)
    with RawClient(cluster.brokers[survivor].bootstrap) as raw:
        for partition in range(PARTITIONS):
            refused = raw.produce(topic, partition, build_batch([Rec(b"refused")]), acks=-1)
            assert refused.error_code == NOT_ENOUGH_REPLICAS, refused
            taken = raw.produce(topic, partition, build_batch([Rec(b"one-copy")]), acks=1)
            assert taken.error_code == 0, taken
    # and the producers get no acknowledgement meanwhile (they retry)
    still = {p.tag: p.acked_count() for p in producers}
    assert still == acked_at_shrink, (acked_at_shrink, still)
    print(f"{time.monotonic() - killed_at:.1f}s after the kills: NOT_ENOUGH_REPLICAS; "
          f"producers' failures so far {[p.failed_summary() for p in producers]}")

    # one broker back: it catches up, joins the ISR, and acks=all goes through again
    cluster.restart(doomed[0])
    wait_for(lambda: all(len(cluster.isr(topic, p)) == 2 for p in range(PARTITIONS)), WAIT_S,
             "ISRs of two")
    for producer in producers:
        for partition in range(PARTITIONS):
            producer.wait_acked(10, WAIT_S, partition=partition)
    with RawClient(cluster.brokers[survivor].bootstrap) as raw:
        for partition in range(PARTITIONS):
            answer = raw.produce(topic, partition, build_batch([Rec(b"accepted")]), acks=-1)
            assert answer.error_code == 0, answer

    cluster.restart(doomed[1])
    cluster.wait_full_isr(topic, PARTITIONS)
    assert_nothing_lost(cluster, topic, producers)
