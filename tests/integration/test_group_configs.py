"""Config resources Kafka 4.0 serves and librdkafka's 0081_admin uses: GROUP configs
(KIP-848's consumer.session.timeout.ms and friends) through confluent-kafka's
DescribeConfigs / IncrementalAlterConfigs, their effect on a consumer group's
heartbeat, and broker keys Kafka's DynamicBrokerConfig accepts at run time."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from .helpers import create_topic
from .test_kip848_errors import Client, heartbeat

if TYPE_CHECKING:
    from conftest import BrokerFactory

TIMEOUT_S = 30


def describe(admin: AdminClient, resource: ConfigResource) -> dict[str, Any]:
    return admin.describe_configs([resource])[resource].result(TIMEOUT_S)


def alter(admin: AdminClient, resource: ConfigResource, name: str, value: str | None,
          op: AlterConfigOpType = AlterConfigOpType.SET) -> None:
    resource = ConfigResource(resource.restype, resource.name, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def refused(admin: AdminClient, resource: ConfigResource, name: str, value: str) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        alter(admin, resource, name, value)
    error: KafkaError = info.value.args[0]
    return error


def test_group_configs_are_described_altered_and_applied(
        broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    group = f"g-{uuid.uuid4().hex[:8]}"
    resource = ConfigResource(ResourceType.GROUP, group)
    # every group config, from the broker's defaults, for a group that does not exist
    entries = describe(admin, resource)
    assert {n: e.value for n, e in entries.items()} == {
        "consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000",
        "share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "5000",
        "share.record.lock.duration.ms": "30000", "share.auto.offset.reset": "latest"}
    assert {e.source for e in entries.values()} == {ConfigSource.DEFAULT_CONFIG.value}

    alter(admin, resource, "consumer.session.timeout.ms", "50000")
    alter(admin, resource, "consumer.heartbeat.interval.ms", "6000")
    entry = describe(admin, resource)["consumer.session.timeout.ms"]
    assert (entry.value, entry.source) == ("50000", ConfigSource.GROUP_CONFIG.value)
    # outside the broker's group.consumer.min/max bounds, or not a group config
    assert refused(admin, resource, "consumer.session.timeout.ms", "1000").code() == (
        KafkaError.INVALID_CONFIG)
    assert refused(admin, resource, "session.timeout.ms", "50000").code() == (
        KafkaError.INVALID_CONFIG)

    # a KIP-848 member of the group is given the group's heartbeat interval
    create_topic(b.bootstrap, topic_name, 1)
    client = Client(b.bootstrap)
    deadline = time.monotonic() + TIMEOUT_S  # the first FindCoordinator makes the topic
    while client.call(10, 1, {"key": group, "key_type": 0})["error_code"] != 0:
        assert time.monotonic() < deadline, "no coordinator"
        time.sleep(0.1)
    joined = heartbeat(client, group, str(uuid.uuid4()), 0,
                       subscribed_topic_names=[topic_name], topic_partitions=[])
    assert (joined["error_code"], joined["heartbeat_interval_ms"]) == (0, 6000)

    alter(admin, resource, "consumer.session.timeout.ms", None, AlterConfigOpType.DELETE)
    b.restart()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    entries = describe(admin, resource)  # the rest is kept across a restart
    assert entries["consumer.session.timeout.ms"].value == "45000"
    assert entries["consumer.heartbeat.interval.ms"].value == "6000"


def test_kafka_dynamic_broker_keys_are_accepted(broker_factory: BrokerFactory) -> None:
    """A key Kafka's DynamicBrokerConfig takes at run time (0081_admin sets this one);
    a key Kafka takes only statically is still refused."""
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0")
    alter(admin, resource, "sasl.kerberos.min.time.before.relogin", "58000")
    entry = describe(admin, resource)["sasl.kerberos.min.time.before.relogin"]
    assert (entry.value, entry.source) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert entry.is_read_only is False
    assert refused(admin, resource, "log.dirs", "/elsewhere").code() == (
        KafkaError.INVALID_CONFIG)
