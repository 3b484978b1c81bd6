"""Topic administration with confluent AdminClient and kafka-python KafkaAdminClient,
plus auto topic creation."""

from __future__ import annotations

from typing import TYPE_CHECKING

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KPNewPartitions
from kafka.admin import NewTopic as KPNewTopic
from kafka.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)

from . import rawclient
from .helpers import (
    OP_TIMEOUT_S,
    admin,
    assert_delivered,
    create_topic,
    produce_all,
    producer,
    topic_partitions,
    wait_topic,
)

KAFKA_TOPIC_DEFAULTS = {
    "retention.ms": "604800000",
    "cleanup.policy": "delete",
    "segment.bytes": "1073741824",
}
INVALID_NAMES = ["bad topic!", "", "..", ".", "a" * 250, "slash/name"]

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory


def confluent_error_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), repr(exc)
    err = exc.args[0]
    assert isinstance(err, KafkaError)
    return int(err.code())


def kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)


def wait_gone(bootstrap: str, name: str, timeout: float = OP_TIMEOUT_S) -> None:
    a = admin(bootstrap)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if name not in a.list_topics(timeout=5).topics:
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} still listed after delete")


# --- confluent AdminClient ---------------------------------------------------------------
def test_create_with_partitions_and_configs(broker: Broker, topic_name: str) -> None:
    config = {"retention.ms": "3600000", "cleanup.policy": "compact"}
    create_topic(broker.bootstrap, topic_name, partitions=3, config=config)
    md = admin(broker.bootstrap).list_topics(timeout=5)
    assert topic_name in md.topics
    assert sorted(md.topics[topic_name].partitions) == [0, 1, 2]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    a = admin(broker.bootstrap)
    entries = a.describe_configs([res])[res].result(timeout=OP_TIMEOUT_S)
    assert entries["retention.ms"].value == "3600000"
    assert entries["cleanup.policy"].value == "compact"
    assert entries["segment.bytes"].value == KAFKA_TOPIC_DEFAULTS["segment.bytes"]


def test_create_existing_topic_fails(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    a = admin(broker.bootstrap)
    fut = a.create_topics([NewTopic(topic_name, 1, 1)],
                                                request_timeout=OP_TIMEOUT_S)
    with pytest.raises(KafkaException) as exc:
        fut[topic_name].result(timeout=OP_TIMEOUT_S)
    assert confluent_error_code(exc.value) == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("name", INVALID_NAMES, ids=lambda n: f"len{len(n)}-{n[:12]!r}")
def test_create_invalid_name_fails(broker: Broker, name: str) -> None:
    a = admin(broker.bootstrap)
    fut = a.create_topics([NewTopic(name, 1, 1)],
                                                request_timeout=OP_TIMEOUT_S)
    with pytest.raises(KafkaException) as exc:
        fut[name].result(timeout=OP_TIMEOUT_S)
    assert confluent_error_code(exc.value) == KafkaError.TOPIC_EXCEPTION  # 17
    assert name not in admin(broker.bootstrap).list_topics(timeout=5).topics


def test_create_zero_partitions_fails(broker: Broker, topic_name: str) -> None:
    a = admin(broker.bootstrap)
    fut = a.create_topics(
        [NewTopic(topic_name, num_partitions=0, replication_factor=1)],
        request_timeout=OP_TIMEOUT_S, validate_only=False)
    with pytest.raises((KafkaException, ValueError)):
        fut[topic_name].result(timeout=OP_TIMEOUT_S)


def test_delete_topic(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    a = admin(broker.bootstrap)
    fut = a.delete_topics([topic_name], request_timeout=OP_TIMEOUT_S)
    assert fut[topic_name].result(timeout=OP_TIMEOUT_S) is None
    wait_gone(broker.bootstrap, topic_name)
    # deleting again: unknown topic
    a = admin(broker.bootstrap)
    fut = a.delete_topics([topic_name], request_timeout=OP_TIMEOUT_S)
    with pytest.raises(KafkaException) as exc:
        fut[topic_name].result(timeout=OP_TIMEOUT_S)
    assert confluent_error_code(exc.value) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_then_recreate_starts_empty(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    assert_delivered(produce_all(producer(broker.bootstrap), topic_name,
                                 [{"value": b"old", "partition": 0}] * 3))
    a = admin(broker.bootstrap)
    a.delete_topics([topic_name])[topic_name].result(OP_TIMEOUT_S)
    wait_gone(broker.bootstrap, topic_name)
    create_topic(broker.bootstrap, topic_name)
    with rawclient.RawClient(broker.bootstrap) as rc:
        assert rc.high_watermark(topic_name) == 0


def test_create_partitions_grow_and_shrink(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    a = admin(broker.bootstrap)
    a.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(OP_TIMEOUT_S)
    wait_topic(broker.bootstrap, topic_name, 4)
    # the new partitions accept data
    reports = produce_all(producer(broker.bootstrap), topic_name,
                          [{"value": f"p{p}".encode(), "partition": p} for p in range(4)])
    assert_delivered(reports)
    with pytest.raises(KafkaException) as exc:
        a.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(OP_TIMEOUT_S)
    assert confluent_error_code(exc.value) == KafkaError.INVALID_PARTITIONS
    assert topic_partitions(broker.bootstrap, topic_name) == 4


def test_describe_topic_config_defaults(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    a = admin(broker.bootstrap)
    entries = a.describe_configs([res])[res].result(timeout=OP_TIMEOUT_S)
    for key, value in KAFKA_TOPIC_DEFAULTS.items():
        assert key in entries, f"{key} missing from DescribeConfigs"
        assert entries[key].value == value, (key, entries[key].value)


def test_describe_broker_config(broker: Broker) -> None:
    a = admin(broker.bootstrap)
    broker_id = next(iter(a.list_topics(timeout=5).brokers))
    res = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    entries = a.describe_configs([res])[res].result(timeout=OP_TIMEOUT_S)
    assert entries["log.segment.bytes"].value == "1073741824"
    assert entries["message.max.bytes"].value is not None
    assert "num.partitions" in entries
    assert "auto.create.topics.enable" in entries


def test_describe_unknown_topic_config(broker: Broker, topic_name: str) -> None:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    a = admin(broker.bootstrap)
    with pytest.raises(KafkaException) as exc:
        a.describe_configs([res])[res].result(timeout=OP_TIMEOUT_S)
    assert confluent_error_code(exc.value) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_list_topics_metadata(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=5)
    md = admin(broker.bootstrap).list_topics(timeout=5)
    t = md.topics[topic_name]
    assert t.error is None
    assert sorted(t.partitions) == list(range(5))
    broker_ids = set(md.brokers)
    for p in t.partitions.values():
        assert p.leader in broker_ids
        assert p.replicas == [p.leader]
        assert p.isrs == [p.leader]
    b = md.brokers[p.leader]
    assert f"{b.host}:{b.port}" == broker.bootstrap


# --- kafka-python KafkaAdminClient --------------------------------------------------------
def test_kafka_python_admin_lifecycle(broker: Broker, topic_name: str) -> None:
    a = kp_admin(broker.bootstrap)
    try:
        a.create_topics([KPNewTopic(topic_name, 2, 1, topic_configs={"retention.ms": "1000000"})],
                        timeout_ms=10000)
        wait_topic(broker.bootstrap, topic_name, 2)
        assert topic_name in a.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            a.create_topics([KPNewTopic(topic_name, 2, 1)], timeout_ms=10000)

        resp = a.describe_configs([KPConfigResource(ConfigResourceType.TOPIC, topic_name)],
                                  config_filter="all")
        configs = kp_config_map(resp, topic_name)
        assert configs["retention.ms"] == "1000000"
        assert configs["cleanup.policy"] == "delete"

        a.create_partitions({topic_name: KPNewPartitions(total_count=4)})
        wait_topic(broker.bootstrap, topic_name, 4)
        with pytest.raises(InvalidPartitionsError):
            a.create_partitions({topic_name: KPNewPartitions(total_count=3)})

        a.delete_topics([topic_name], timeout_ms=10000)
        wait_gone(broker.bootstrap, topic_name)
    finally:
        a.close()


def kp_config_map(resp: dict[str, dict[str, dict[str, dict[str, object]]]],
                  topic: str) -> dict[str, object]:
    """Config name -> value from kafka-python 3's describe_configs result."""
    return {name: entry["value"] for name, entry in resp["topic"][topic].items()}


@pytest.mark.parametrize("name", ["bad topic!", "a" * 250])
def test_kafka_python_admin_invalid_name(broker: Broker, name: str) -> None:
    a = kp_admin(broker.bootstrap)
    try:
        with pytest.raises(InvalidTopicError):
            a.create_topics([KPNewTopic(name, 1, 1)], timeout_ms=10000)
    finally:
        a.close()


# --- auto topic creation -----------------------------------------------------------------
def test_auto_create_on_produce_default(broker: Broker, topic_name: str) -> None:
    p = producer(broker.bootstrap)
    reports = produce_all(p, topic_name, [{"value": b"auto"}])
    assert_delivered(reports)
    assert topic_name in admin(broker.bootstrap).list_topics(timeout=5).topics


def test_auto_create_uses_num_partitions(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(num_partitions=3)
    assert_delivered(produce_all(producer(b.bootstrap), topic_name, [{"value": b"x"}]))
    assert topic_partitions(b.bootstrap, topic_name) == 3


def test_auto_create_disabled(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(auto_create_topics_enable="false")
    with rawclient.RawClient(b.bootstrap) as rc:
        md = rawclient.metadata_v4(rc, [topic_name], allow_auto_create=True)
        assert md[topic_name].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        part = rc.produce(topic_name, 0, rawclient.build_batch([rawclient.Rec(b"v")]), acks=1)
        assert part.error_code == 3
    p = producer(b.bootstrap, message_timeout_ms=3000, topic_metadata_propagation_max_ms=1000)
    reports = produce_all(p, topic_name, [{"value": b"x"}])
    err = reports[0].error()
    assert err is not None
    assert err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
                          KafkaError._MSG_TIMED_OUT)
    assert topic_name not in admin(b.bootstrap).list_topics(timeout=5).topics
    # explicit creation still works
    create_topic(b.bootstrap, topic_name, partitions=2)


def test_metadata_auto_create_flag(broker: Broker, topic_name: str) -> None:
    """Metadata v4 with allow_auto_topic_creation=false must not create the topic."""
    with rawclient.RawClient(broker.bootstrap) as rc:
        md = rawclient.metadata_v4(rc, [topic_name], allow_auto_create=False)
        assert md[topic_name].error_code == 3
        md = rawclient.metadata_v4(rc, None, allow_auto_create=False)
        assert topic_name not in md
