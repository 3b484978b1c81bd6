"""Consumer groups across a coordinator failover (issue 12).

A group's coordinator is the leader of its `__consumer_offsets` partition
(Kafka's rule: Java's String.hashCode of the group id, made non-negative, modulo
the partition count). When that broker dies, another replica of the partition
leads it, loads the group and its committed offsets, and the members carry on.
A commit that was acknowledged must survive: the coordinator answers only once
the partition's ISR has the commit."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.cluster.cluster import WAIT_S, Cluster, java_string_hash, wait_for
from tests.cluster.scenario import PARTITIONS, TOPIC_CONFIGS
from tests.integration.protoclient import ProtoClient
from tests.integration.rawclient import RawClient, Rec, build_batch

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_FETCH = 9
NOT_COORDINATOR = 16
#: offsets.topic.num.partitions in the test cluster (tests/cluster/cluster.py)
OFFSETS_PARTITIONS = 5
RECORDS_PER_PARTITION = 200


def offsets_partition(group: str) -> int:
    h = java_string_hash(group)  # Kafka's Utils.abs: MIN_VALUE -> 0, else Math.abs
    return (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS


def coordinator(cluster: Cluster, group: str) -> int:
    """The group's coordinator: the leader of its offsets partition, which is also
    what FindCoordinator answers."""
    # a client of the live brokers only (librdkafka 2.16's admin client was seen to
    # abort on an assertion when a broker it had used died)
    admin = AdminClient({"bootstrap.servers": ",".join(
        cluster.brokers[b].bootstrap for b in cluster.live())})
    described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(WAIT_S)
    leader = cluster.leader(OFFSETS_TOPIC, offsets_partition(group))
    assert described.coordinator.id == leader, (described.coordinator.id, leader)
    return leader


def fill(cluster: Cluster, topic: str) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for partition in range(PARTITIONS):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, f"{partition}:{i}".encode(), partition=partition)
            producer.poll(0)
    assert producer.flush(WAIT_S) == 0


def committed(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as a fresh client of the group sees them."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                 timeout=10)
        for tp in tps:
            if tp.error is not None:
                raise KafkaException(tp.error)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def create_offsets_topic(cluster: Cluster, group: str) -> None:
    """FindCoordinator creates __consumer_offsets; wait until all its partitions
    have full ISRs."""
    wait_for(lambda: coordinator(cluster, group) >= 0, WAIT_S, "a coordinator")
    cluster.wait_full_isr(OFFSETS_TOPIC, OFFSETS_PARTITIONS)


def test_group_keeps_offsets_and_consumes_on_when_its_coordinator_dies(
        cluster: Cluster) -> None:
    topic = "events"
    group = f"g-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    fill(cluster, topic)
    create_offsets_topic(cluster, group)
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": group,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
    })
    seen: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
    last_commit: dict[int, int] = {}
    commit_errors: list[str] = []
    total = PARTITIONS * RECORDS_PER_PARTITION

    def consume_and_commit(until: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while sum(len(s) for s in seen.values()) < until:
            assert time.monotonic() < deadline, (
                f"consumed {sum(len(s) for s in seen.values())} of {until} in {timeout_s}s "
                f"(commit errors: {commit_errors[-5:]})")
            messages = consumer.consume(20, timeout=1.0)
            batch = [m for m in messages if m.error() is None]
            for message in batch:
                seen[message.partition()].add(message.offset())
            if not batch:
                continue
            try:
                result = consumer.commit(asynchronous=False)
            except KafkaException as exc:
                commit_errors.append(str(exc))
                continue
            for tp in result or []:
                if tp.error is None and tp.offset >= 0:
                    last_commit[tp.partition] = tp.offset

    try:
        consumer.subscribe([topic])
        consume_and_commit(total // 2, WAIT_S)
        before = dict(last_commit)
        victim = coordinator(cluster, group)
        cluster.kill(victim)
        killed_at = time.monotonic()

        # another replica of the offsets partition coordinates the group now, and has
        # every commit that was acknowledged
        new = wait_for(lambda: (c := coordinator(cluster, group)) != victim and c,
                       WAIT_S, "a new coordinator")
        after = wait_for(lambda: committed(cluster, group, topic), WAIT_S,
                         "the committed offsets from the new coordinator")
        for partition, offset in before.items():
            assert after.get(partition, -1) >= offset, (
                f"committed offset of {topic}-{partition} went back from {offset} to "
                f"{after.get(partition)} when broker {victim} (coordinator) died; "
                f"broker {new} coordinates now")

        # the member carries on to the end, committing on the new coordinator
        consume_and_commit(total, 60.0)
        def at_the_end() -> dict[int, int] | None:
            now = committed(cluster, group, topic)
            return now if all(now.get(p) == RECORDS_PER_PARTITION
                              for p in range(PARTITIONS)) else None
        final = wait_for(at_the_end, WAIT_S, "the final commits")
        print(f"coordinator {victim} killed; broker {new} took over; consumed to the end "
              f"{time.monotonic() - killed_at:.1f}s after the kill; commit errors on the way: "
              f"{len(commit_errors)}; committed {final}")
    finally:
        consumer.close()
    for partition, offsets in seen.items():
        assert offsets == set(range(RECORDS_PER_PARTITION)), (
            f"{topic}-{partition}: never consumed "
            f"{sorted(set(range(RECORDS_PER_PARTITION)) - offsets)[:20]}")


def test_acknowledged_commit_survives_the_coordinator(cluster: Cluster) -> None:
    """The coordinator's followers are paused (shorter than their sessions), a commit
    is made, and the coordinator is killed before they could fetch it: a commit the
    coordinator acknowledged must be there on the new coordinator. (Appended without
    waiting for the ISR, it was acknowledged at once and lost.)"""
    topic = "commits"
    group = f"c-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    create_offsets_topic(cluster, group)
    victim = coordinator(cluster, group)
    followers = [b for b in cluster.brokers if b != victim]
    # a partition the coordinator leads: its followers fetch it in the same requests
    # as the offsets partition, so an append there answers any fetch they left waiting
    sentinel_partition = next(p for p in range(PARTITIONS) if cluster.leader(topic, p) == victim)
    consumer = Consumer({"bootstrap.servers": cluster.brokers[victim].bootstrap,
                         "group.id": group, "enable.auto.commit": False})
    outcome: dict[str, Any] = {}
    try:
        first = consumer.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
        assert first is not None and first[0].error is None, first
        wait_for(lambda: committed(cluster, group, topic).get(0) == 10, WAIT_S, "commit 10")

        def commit_20() -> None:
            try:
                result = consumer.commit(offsets=[TopicPartition(topic, 0, 20)],
                                         asynchronous=False)
                outcome["result"] = result[0].error if result else "no result"
            except KafkaException as exc:
                outcome["error"] = exc.args[0]

        for follower in followers:
            cluster.pause(follower)
        try:
            with RawClient(cluster.brokers[victim].bootstrap) as raw:
                answer = raw.produce(topic, sentinel_partition,
                                     build_batch([Rec(b"sentinel")]), acks=1)
                assert answer.error_code == 0, answer
            committer = threading.Thread(target=commit_20, daemon=True)
            committer.start()
            # an acknowledgement would come within milliseconds; a commit waiting for
            # the paused followers does not come at all
            committer.join(1.5)
            acknowledged_early = "result" in outcome and outcome["result"] is None
            cluster.kill(victim)
        finally:
            for follower in followers:
                cluster.resume(follower)
        committer.join(60)
        assert not committer.is_alive(), "the commit never returned"
    finally:
        consumer.close()

    cluster.wait_leader_not(OFFSETS_TOPIC, offsets_partition(group), victim)
    now = wait_for(lambda: committed(cluster, group, topic), WAIT_S,
                   "the committed offsets from the new coordinator")
    print(f"commit of 20: {outcome} (acknowledged before the kill: {acknowledged_early}); "
          f"the new coordinator has {now.get(0)}")
    if outcome.get("result", "failed") is None:
        assert now.get(0) == 20, (
            f"the commit of offset 20 was acknowledged ({outcome}), but the new coordinator "
            f"has {now.get(0)}")
    else:
        assert now.get(0) in (10, 20), now


def test_offset_fetch_elsewhere_than_the_coordinator_is_not_coordinator(
        cluster: Cluster) -> None:
    """Every OffsetFetch version answers NOT_COORDINATOR on a broker that does not
    coordinate the group, as Kafka does, so the client finds the coordinator again.
    (It answered "no committed offset", and a consumer would then reset its position by
    auto.offset.reset: re-read or skip records.)"""
    topic = "fetched-offsets"
    group = f"f-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    create_offsets_topic(cluster, group)
    owner = coordinator(cluster, group)
    other = next(b for b in cluster.live() if b != owner)
    consumer = Consumer({"bootstrap.servers": cluster.brokers[owner].bootstrap,
                         "group.id": group, "enable.auto.commit": False})
    try:
        done = consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        assert done is not None and done[0].error is None, done
    finally:
        consumer.close()
    asked = [{"name": topic, "partition_indexes": [0]}]
    with ProtoClient(cluster.brokers[other].bootstrap) as elsewhere, \
            ProtoClient(cluster.brokers[owner].bootstrap) as there:
        for version in (1, 5, 7):
            body = {"group_id": group, "topics": asked, "require_stable": False}
            wrong = elsewhere.request(OFFSET_FETCH, version, body)
            right = there.request(OFFSET_FETCH, version, body)
            if version < 2:  # no top-level error: it is on every partition asked for
                code = wrong["topics"][0]["partitions"][0]["error_code"]
            else:
                code = wrong["error_code"]
            assert code == NOT_COORDINATOR, (version, wrong)
            assert right["topics"][0]["partitions"][0]["committed_offset"] == 7, right
        for version in (8, 9):
            body = {"groups": [{"group_id": group, "topics": asked, "member_id": None,
                                "member_epoch": -1}], "require_stable": False}
            [wrong] = elsewhere.request(OFFSET_FETCH, version, body)["groups"]
            [right] = there.request(OFFSET_FETCH, version, body)["groups"]
            assert wrong["error_code"] == NOT_COORDINATOR and not wrong["topics"], wrong
            assert right["topics"][0]["partitions"][0]["committed_offset"] == 7, right
