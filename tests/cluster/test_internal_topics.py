"""Internal topics created by a Metadata request in a 3-broker ZooKeeper cluster (Burrow
and sarama ask for `__consumer_offsets` before any group exists) get Kafka's settings
and replication factor, so consumer groups survive the stop of any one broker. As an
ordinary auto-created topic (num.partitions=1, default.replication.factor=1) the one
broker holding the single replica took every group down when it stopped."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.cluster.cluster import SIZE, WAIT_S, Cluster, cluster_fixture, java_string_hash, wait_for
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration.rawclient import RawClient, metadata_v4

OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"
#: offsets.topic.num.partitions of the test cluster (tests/cluster/cluster.py)
OFFSETS_PARTITIONS = 5
TXN_PARTITIONS = 3
DATA_TOPIC = "events"


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    # the ordinary auto-create settings differ from the internal topics' own
    yield from cluster_fixture(zookeeper, tmp_path, request, overrides={
        "num.partitions": "1", "default.replication.factor": "1",
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS)})


def live_bootstrap(cluster: Cluster) -> str:
    return ",".join(cluster.brokers[b].bootstrap for b in cluster.live())


def shape(cluster: Cluster, name: str) -> tuple[int, set[int]]:
    md = AdminClient({"bootstrap.servers": live_bootstrap(cluster)}).list_topics(
        topic=name, timeout=10).topics[name]
    assert md.error is None, md.error
    return len(md.partitions), {len(p.replicas) for p in md.partitions.values()}


def configs(cluster: Cluster, name: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": live_bootstrap(cluster)})
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)]).values()
    return {k: v.value for k, v in future.result(WAIT_S).items()}


def group_per_partition() -> dict[int, str]:
    """A group id for each offsets partition (Kafka's placement rule)."""
    groups: dict[int, str] = {}
    while len(groups) < OFFSETS_PARTITIONS:
        group = f"g-{uuid.uuid4().hex[:8]}"
        h = java_string_hash(group)
        groups.setdefault((0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS, group)
    return groups


def commit_and_read(cluster: Cluster, group: str, offset: int) -> Any:
    """Commit `offset` for the group on the live brokers and read it back (None: not
    yet; the error when a client call fails)."""
    consumer = Consumer({"bootstrap.servers": live_bootstrap(cluster), "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(DATA_TOPIC, 0, offset)], asynchronous=False)
        [got] = consumer.committed([TopicPartition(DATA_TOPIC, 0)], timeout=10)
        if got.error is not None:
            raise KafkaException(got.error)
        return got.offset == offset
    finally:
        consumer.close()


def test_metadata_created_internal_topics_have_kafkas_settings_and_groups_survive(
        cluster: Cluster) -> None:
    cluster.create_topic(DATA_TOPIC, 1)
    with RawClient(cluster.brokers[1].bootstrap) as rc:
        metadata_v4(rc, [OFFSETS, TXN_STATE], True)
    cluster.wait_full_isr(OFFSETS, OFFSETS_PARTITIONS)
    cluster.wait_full_isr(TXN_STATE, TXN_PARTITIONS)

    assert shape(cluster, OFFSETS) == (OFFSETS_PARTITIONS, {SIZE})
    got = configs(cluster, OFFSETS)
    assert (got["cleanup.policy"], got["segment.bytes"]) == ("compact", "104857600")
    assert shape(cluster, TXN_STATE) == (TXN_PARTITIONS, {SIZE})
    got = configs(cluster, TXN_STATE)
    assert (got["cleanup.policy"], got["min.insync.replicas"],
            got["unclean.leader.election.enable"]) == ("compact", "2", "false")

    groups = group_per_partition()
    for offset, broker_id in enumerate(sorted(cluster.brokers), start=1):
        cluster.brokers[broker_id].stop()
        for partition, group in groups.items():
            wait_for(lambda g=group, o=offset: commit_and_read(cluster, g, o), WAIT_S,
                     f"group {group} (offsets partition {partition}) to commit with broker "
                     f"{broker_id} stopped")
        cluster.restart(broker_id)
        cluster.wait_full_isr(OFFSETS, OFFSETS_PARTITIONS)
