"""A zombie leader (issue 12): the leader is paused (SIGSTOP) longer than its
ZooKeeper session, the cluster elects another, and then the old one wakes up
(SIGCONT) believing it still leads. It must not acknowledge an acks=all write
that the new leader does not have."""

from __future__ import annotations

import time

from tests.cluster.cluster import WAIT_S, Cluster, wait_for
from tests.cluster.scenario import (
    PARTITIONS,
    TOPIC_CONFIGS,
    assert_nothing_lost,
    start_producers,
)
from tests.integration.rawclient import (
    API_PRODUCE,
    ProducePart,
    RawClient,
    Rec,
    build_batch,
    parse_produce_v3,
    produce_body_v3,
)

NOT_LEADER_OR_FOLLOWER = 6
#: how long the woken zombie is kept from ZooKeeper and produced to
ZOMBIE_S = 6.0


def produce(raw: RawClient, topic: str, value: bytes, timeout_ms: int) -> ProducePart:
    """One acks=all record to partition 0, waiting at most timeout_ms for the ISR."""
    body = raw.request(API_PRODUCE, 3, produce_body_v3(topic, 0, build_batch([Rec(value)]),
                                                       acks=-1, timeout_ms=timeout_ms))
    return parse_produce_v3(body)[0]


def test_paused_leader_acknowledges_nothing_the_new_leader_lacks(
        proxied_cluster: Cluster) -> None:
    """While paused, acks=all produce requests queue in its socket; once woken it is
    kept from ZooKeeper for a while (its link frozen), so it cannot learn that its
    session expired and still believes it leads: only the high watermark (no
    follower fetches from it any more) keeps it from acknowledging."""
    cluster = proxied_cluster
    topic = "zombie"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    victim = cluster.leader(topic, 0)
    others = set(cluster.brokers) - {victim}
    acknowledged: list[tuple[int, bytes]] = []  # (offset, value) the zombie said it wrote
    answers: list[int] = []

    # connected before the pause; requests sent during it wait in the socket
    early = RawClient(cluster.brokers[victim].bootstrap, timeout=WAIT_S + 30)
    cluster.pause(victim)
    try:
        sent_while_paused = []
        for i in range(3):
            value = f"paused:{i}".encode()
            early.send(API_PRODUCE, 3, produce_body_v3(topic, 0, build_batch([Rec(value)]),
                                                       acks=-1, timeout_ms=1000))
            sent_while_paused.append(value)
        # the cluster moves on: the zombie's session expires, another broker leads
        # (the producers' requests to the zombie wait until their request.timeout.ms,
        # as with Kafka: a stopped process keeps its connections open)
        cluster.wait_registered(others)
        new_leader = cluster.wait_leader_not(topic, 0, victim)
        cluster.proxies[victim].cut("freeze")
    finally:
        cluster.resume(victim)
    woke_at = time.monotonic()

    try:
        # the requests that waited in the socket are answered now
        for value in sent_while_paused:
            _, body = early.recv()
            (answer,) = parse_produce_v3(body)
            answers.append(answer.error_code)
            if answer.error_code == 0:
                acknowledged.append((answer.base_offset, value))
        early.close()
        # and it is produced to directly while it cannot reach ZooKeeper
        i = 0
        while time.monotonic() - woke_at < ZOMBIE_S:
            value = f"woken:{i}".encode()
            i += 1
            with RawClient(cluster.brokers[victim].bootstrap, timeout=WAIT_S) as raw:
                answer = produce(raw, topic, value, timeout_ms=2000)
            answers.append(answer.error_code)
            if answer.error_code == 0:
                acknowledged.append((answer.base_offset, value))
    finally:
        cluster.proxies[victim].restore()

    # back in touch with ZooKeeper it learns its session expired and stops leading
    def admits() -> bool:
        with RawClient(cluster.brokers[victim].bootstrap, timeout=WAIT_S) as raw:
            answer = produce(raw, topic, b"late", timeout_ms=2000)
        answers.append(answer.error_code)
        if answer.error_code == 0:
            acknowledged.append((answer.base_offset, b"late"))
        return answer.error_code == NOT_LEADER_OR_FOLLOWER
    wait_for(admits, WAIT_S, "the zombie to answer NOT_LEADER_OR_FOLLOWER")
    print(f"the zombie answered {answers} and acknowledged {acknowledged}")

    # it rejoins as a follower of the new leader
    cluster.wait_registered(set(cluster.brokers))
    cluster.wait_full_isr(topic, PARTITIONS)
    assert cluster.leader(topic, 0) == new_leader
    for producer in producers:
        producer.wait_acked(20, WAIT_S, partition=0)

    # every write the zombie acknowledged is on the new leader, at that offset
    found = dict(cluster.read_partition(topic, 0))
    missing = [(offset, value) for offset, value in acknowledged if found.get(offset) != value]
    assert not missing, (f"the zombie acknowledged {len(acknowledged)} acks=all writes; "
                         f"missing on the new leader: {missing} (answers {answers})")
    assert_nothing_lost(cluster, topic, producers)
    # the logs agree everywhere once the zombie has truncated and caught up
    wait_for(lambda: len({cluster.log_bytes(b, topic, 0) for b in cluster.brokers}) == 1,
             WAIT_S, "identical logs of partition 0")
