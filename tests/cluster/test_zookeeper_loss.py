"""Losing ZooKeeper (issue 12): one broker's link to ZooKeeper goes through a proxy
and is cut for longer than its session timeout.

A partition leader that lost its session is fenced: the controller gives its
partitions to other replicas, it acknowledges nothing the new leaders lack, and
once the link is back it learns its session expired, follows the new leaders and
rejoins the ISRs. The controller losing its session is replaced by another broker
and stops acting as controller."""

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
    RawClient,
    Rec,
    build_batch,
    parse_produce_v3,
    produce_body_v3,
)

NOT_LEADER_OR_FOLLOWER = 6


def produce_to(cluster: Cluster, broker_id: int, topic: str, partition: int, value: bytes,
               timeout_ms: int = 2000) -> tuple[int, int]:
    """One acks=all record straight to one broker: (error code, base offset)."""
    with RawClient(cluster.brokers[broker_id].bootstrap, timeout=WAIT_S) as raw:
        body = raw.request(API_PRODUCE, 3, produce_body_v3(
            topic, partition, build_batch([Rec(value)]), acks=-1, timeout_ms=timeout_ms))
    answer = parse_produce_v3(body)[0]
    return answer.error_code, answer.base_offset


def test_broker_cut_from_zookeeper_is_fenced_and_rejoins(proxied_cluster: Cluster) -> None:
    cluster = proxied_cluster
    topic = "cut"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    controller = cluster.controller()
    # a partition led by a broker other than the controller (the controller's own
    # loss is the next test)
    partition = next(p for p in range(PARTITIONS) if cluster.leader(topic, p) != controller)
    victim = cluster.leader(topic, partition)
    others = set(cluster.brokers) - {victim}
    led = [p for p in range(PARTITIONS) if cluster.leader(topic, p) == victim]

    def in_an_isr() -> list[int]:
        return [p for p in range(PARTITIONS) if victim in cluster.isr(topic, p)]

    history = cluster.watch_isr(topic, PARTITIONS)
    cluster.proxies[victim].cut("freeze")
    cut_at = time.monotonic()
    acknowledged: list[tuple[int, bytes]] = []
    answers: list[int] = []
    try:
        # the cluster carries on without it: its session expires, its partitions move,
        # it leaves every ISR ...
        cluster.wait_registered(others)
        for p in led:
            cluster.wait_leader_not(topic, p, victim)
        wait_for(lambda: not in_an_isr(), WAIT_S, f"broker {victim} out of every ISR")
        # ... and the producers go on, with nothing acknowledged by the cut-off broker
        # that its successor lacks; it fences itself, answering NOT_LEADER_OR_FOLLOWER
        # (no leader would take a broker without a session back into its ISR meanwhile)
        i = 0
        while True:
            value = f"cut:{i}".encode()
            i += 1
            code, offset = produce_to(cluster, victim, topic, partition, value)
            answers.append(code)
            if code == 0:
                acknowledged.append((offset, value))
            if code == NOT_LEADER_OR_FOLLOWER:
                break
            assert time.monotonic() - cut_at < WAIT_S, (
                f"broker {victim} still leads {WAIT_S}s after it was cut: {answers}")
        fenced_s = time.monotonic() - cut_at
        for producer in producers:
            producer.wait_acked(20, WAIT_S, partition=partition)
        served_s = time.monotonic() - cut_at
        assert not in_an_isr()
        during_cut = {p: list(isrs) for p, isrs in history.items()}
    finally:
        cluster.proxies[victim].restore()
    print(f"broker {victim} cut from ZooKeeper: fenced after {fenced_s:.1f}s (answers "
          f"{answers}), its partition served by broker {cluster.leader(topic, partition)} "
          f"after at most {served_s:.1f}s")
    # once out of an ISR, the broker without a session never got back in while cut
    for p, isrs in during_cut.items():
        dropped = next(i for i, isr in enumerate(isrs) if victim not in isr)
        assert all(victim not in isr for isr in isrs[dropped:]), (
            f"broker {victim} was taken back into the ISR of {topic}-{p} while it had no "
            f"session: {isrs}")

    # back in touch: it re-registers, follows the new leaders and rejoins every ISR
    cluster.wait_registered(set(cluster.brokers))
    cluster.wait_full_isr(topic, PARTITIONS)
    for producer in producers:
        producer.wait_acked(20, WAIT_S, partition=partition)

    found = dict(cluster.read_partition(topic, partition))
    missing = [(o, v) for o, v in acknowledged if found.get(o) != v]
    assert not missing, f"acknowledged by the cut-off broker but missing: {missing}"
    assert_nothing_lost(cluster, topic, producers)
    wait_for(lambda: len({cluster.log_bytes(b, topic, partition) for b in cluster.brokers}) == 1,
             WAIT_S, f"identical logs of {topic}-{partition}")


def test_controller_cut_from_zookeeper_is_replaced(proxied_cluster: Cluster) -> None:
    cluster = proxied_cluster
    topic = "ctl"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    old = cluster.controller()
    assert old is not None
    epoch = cluster.controller_epoch()

    cluster.proxies[old].cut("freeze")
    try:
        new = wait_for(lambda: (c := cluster.controller()) not in (None, old) and c,
                       WAIT_S, "another controller")
        assert cluster.controller_epoch() > epoch
        # the new controller does the controller's work: the partitions the old one led
        # get new leaders, and it drops from every ISR
        for p in range(PARTITIONS):
            wait_for(lambda p=p: cluster.leader(topic, p) != old and old not in cluster.isr(
                topic, p), WAIT_S, f"{topic}-{p} without broker {old}")
        # the old controller, still cut off, gives up the role on its own once its
        # session must have expired (it cannot hear that from ZooKeeper)
        wait_for(lambda: "stops acting as controller" in cluster.brokers[old].log_tail(400),
                 WAIT_S, f"broker {old} to stop acting as controller")
    finally:
        cluster.proxies[old].restore()
    new_epoch = cluster.controller_epoch()

    # back in touch, it stays a mere broker
    cluster.wait_registered(set(cluster.brokers))
    cluster.wait_full_isr(topic, PARTITIONS)
    assert cluster.controller() == new
    assert cluster.controller_epoch() == new_epoch
    # every partition state written since is the new controller's (epoch-fenced writes)
    for p in range(PARTITIONS):
        assert cluster.state(topic, p)["controller_epoch"] == new_epoch

    # and the cluster still works: a new topic gets leaders and full ISRs
    cluster.create_topic("after-ctl", 2, configs=TOPIC_CONFIGS)
    for p in range(2):
        assert cluster.state("after-ctl", p)["controller_epoch"] == new_epoch
