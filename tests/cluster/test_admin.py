"""Topic administration in a 3-broker cluster: whichever broker a request goes
to, every broker ends up with the same topics, partitions, leaders and configs,
and deleted topics leave no log behind on any broker."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    ResourceType,
)

from tests.cluster.cluster import WAIT_S, Cluster, wait_for


def test_create_assigns_replicas_as_the_seeds_describe(cluster: Cluster) -> None:
    cluster.create_topic("spread", partitions=6, replication=3)
    described = cluster.describe("spread")
    # partition i's first replica on broker (i mod n) + 1, replica j on (i + j) mod n
    for index in range(6):
        expected = [(index + j) % 3 + 1 for j in range(3)]
        assert described[index]["replicas"] == expected
        assert described[index]["leader"] == expected[0]
        assert sorted(described[index]["isr"]) == [1, 2, 3]
    leaders = [described[i]["leader"] for i in range(6)]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]


def test_configs_set_through_one_broker_apply_on_every_broker(cluster: Cluster) -> None:
    cluster.create_topic("conf", partitions=1, replication=3)
    one = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "conf",
                              set_config={"retention.ms": "123456"})
    one.alter_configs([resource])[resource].result(WAIT_S)
    for broker_id in (2, 3):
        other = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap})

        def seen(admin: AdminClient = other) -> bool:
            res = ConfigResource(ConfigResource.Type.TOPIC, "conf")
            entries = admin.describe_configs([res])[res].result(WAIT_S)
            return entries["retention.ms"].value == "123456"

        wait_for(seen, what=f"broker {broker_id} to show the new retention.ms")


def test_partitions_added_get_replicas_and_leaders(cluster: Cluster) -> None:
    cluster.create_topic("grow", partitions=2, replication=2)
    futures = cluster.admin().create_partitions([NewPartitions("grow", 5)],
                                                request_timeout=WAIT_S)
    futures["grow"].result(WAIT_S)
    wait_for(lambda: len(cluster.describe("grow")) == 5
             and all(p["leader"] > 0 and len(p["isr"]) == 2
                     for p in cluster.describe("grow").values()),
             what="the new partitions to have leaders and full ISRs")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for index in range(5):
        producer.produce("grow", value=b"v%d" % index, partition=index)
    assert producer.flush(WAIT_S) == 0
    for index in range(5):
        assert [v for _, v in cluster.read_partition("grow", index)] == [b"v%d" % index]


def test_deleted_topic_leaves_no_log_on_any_broker(cluster: Cluster) -> None:
    cluster.create_topic("doomed", partitions=3, replication=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for index in range(3):
        producer.produce("doomed", value=b"x", partition=index)
    assert producer.flush(WAIT_S) == 0
    cluster.admin().delete_topics(["doomed"], request_timeout=WAIT_S)["doomed"].result(WAIT_S)

    def gone() -> bool:
        dirs = [p for b in cluster.brokers.values() for p in b.data_dir.glob("doomed-*")]
        return not dirs and all(
            "doomed" not in AdminClient({"bootstrap.servers": b.bootstrap})
            .list_topics(timeout=5).topics for b in cluster.brokers.values())

    wait_for(gone, what="every broker to drop the topic and its logs")
    assert not cluster.zk.exists("/brokers/topics/doomed")
    assert not cluster.zk.exists("/admin/delete_topics/doomed")


def test_group_configs_set_on_a_fresh_cluster(cluster: Cluster) -> None:
    """The first group config of a cluster creates /config/groups (Kafka creates a
    config znode's parents: KafkaZkClient.setOrCreateEntityConfigs); the configs then
    apply on every broker (librdkafka 0081_admin on three brokers)."""
    one = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    resource = ConfigResource(ResourceType.GROUP, "grp-conf", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "50000",
                    incremental_operation=AlterConfigOpType.SET)])
    one.incremental_alter_configs([resource])[resource].result(WAIT_S)
    for broker_id in (1, 2, 3):
        other = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap})

        def seen(admin: AdminClient = other) -> bool:
            res = ConfigResource(ResourceType.GROUP, "grp-conf")
            entries = admin.describe_configs([res])[res].result(WAIT_S)
            return entries["consumer.session.timeout.ms"].value == "50000"

        wait_for(seen, what=f"broker {broker_id} to show the group's session timeout")
