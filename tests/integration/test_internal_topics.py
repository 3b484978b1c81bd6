"""`__consumer_offsets` and `__transaction_state` get their own settings whichever path
creates them first (admin/internal_topics.py), as Kafka's AutoTopicCreationManager:
a Metadata request that may auto-create topics (Burrow, sarama's
`client.Partitions("__consumer_offsets")`), a group's or a transaction's
FindCoordinator. InitProducerId does not create the transaction log (Kafka: the
producer's FindCoordinator does), and CreateTopics naming an internal topic is an
ordinary CreateTopics, as in Kafka. One broker here; tests/cluster/test_internal_topics.py
has three."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic

from pybroker.errors import ErrorCode

from . import rawclient
from .helpers import admin, create_topic, produce_all, producer
from .protoclient import ProtoClient

if TYPE_CHECKING:
    from tests.conftest import Broker, BrokerFactory

OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"
#: settings that differ from the ordinary topics' (num.partitions, segment.bytes...),
#: so a topic created as an ordinary one shows
SETTINGS = {
    "num.partitions": "2",
    "offsets.topic.num.partitions": "6",
    "offsets.topic.segment.bytes": "52428800",
    "transaction.state.log.num.partitions": "4",
    "transaction.state.log.segment.bytes": "41943040",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
}
EXPECTED = {
    OFFSETS: (6, {"cleanup.policy": "compact", "segment.bytes": "52428800",
                  "compression.type": "producer"}),
    TXN_STATE: (4, {"cleanup.policy": "compact", "segment.bytes": "41943040",
                    "min.insync.replicas": "1", "compression.type": "uncompressed",
                    "unclean.leader.election.enable": "false"}),
}
WAIT_S = 30.0
INIT_PRODUCER_ID = 22


def topic_shape(bootstrap: str, name: str) -> tuple[int, set[int]]:
    """(partitions, replication factors seen) of an existing topic."""
    md = admin(bootstrap).list_topics(topic=name, timeout=10).topics[name]
    assert md.error is None, md.error
    return len(md.partitions), {len(p.replicas) for p in md.partitions.values()}


def topic_configs(bootstrap: str, name: str) -> dict[str, str]:
    client = admin(bootstrap)  # kept: its futures fail once it is gone
    [future] = client.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, name)]).values()
    return {k: v.value for k, v in future.result(10).items()}


def assert_internal_settings(bootstrap: str, name: str) -> None:
    partitions, configs = EXPECTED[name]
    assert topic_shape(bootstrap, name) == (partitions, {1})
    got = topic_configs(bootstrap, name)
    assert {k: got.get(k) for k in configs} == configs


def exists(bootstrap: str, name: str) -> bool:
    """Asked without allowing auto-creation."""
    with rawclient.RawClient(bootstrap) as rc:
        return rawclient.metadata_v4(rc, [name], False)[name].error_code == 0


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> Broker:
    return broker_factory(SETTINGS)


@pytest.mark.parametrize("name", [OFFSETS, TXN_STATE])
def test_metadata_auto_create_gives_internal_settings(broker: Broker, name: str) -> None:
    with rawclient.RawClient(broker.bootstrap) as rc:
        refused = rawclient.metadata_v4(rc, [name], False)[name]
        assert refused.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert not exists(broker.bootstrap, name)
        rawclient.metadata_v4(rc, [name], True)
    assert_internal_settings(broker.bootstrap, name)


def test_metadata_auto_create_of_internal_topic_needs_auto_create_enabled(
        broker_factory: BrokerFactory) -> None:
    """As Kafka, auto.create.topics.enable=false also keeps Metadata from creating the
    internal topics (FindCoordinator still does)."""
    b = broker_factory({**SETTINGS, "auto.create.topics.enable": "false"})
    with rawclient.RawClient(b.bootstrap) as rc:
        topic = rawclient.metadata_v4(rc, [OFFSETS], True)[OFFSETS]
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not exists(b.bootstrap, OFFSETS)


def test_group_find_coordinator_gives_internal_settings(broker: Broker,
                                                        topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic_name}",
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
    finally:
        c.close()
    assert_internal_settings(broker.bootstrap, OFFSETS)


def test_init_producer_id_does_not_create_it_find_coordinator_does(
        broker: Broker, topic_name: str) -> None:
    with ProtoClient(broker.bootstrap) as pc:
        answer = pc.request(INIT_PRODUCER_ID, 1, {"transactional_id": f"t-{topic_name}",
                                                  "transaction_timeout_ms": 60000})
    assert answer["error_code"] in (ErrorCode.NOT_COORDINATOR,
                                    ErrorCode.COORDINATOR_NOT_AVAILABLE), answer
    assert not exists(broker.bootstrap, TXN_STATE)
    create_topic(broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "transactional.id": f"t-{topic_name}"})
    p.init_transactions(WAIT_S)
    p.begin_transaction()
    reports = produce_all(p, topic_name, [{"value": b"v", "partition": 0}])
    p.commit_transaction(WAIT_S)
    assert all(m.error() is None for m in reports)
    assert_internal_settings(broker.bootstrap, TXN_STATE)


def test_create_topics_on_an_internal_name_is_ordinary(broker: Broker,
                                                       topic_name: str) -> None:
    """Kafka creates it as asked (the request's partitions, factor and configs); the
    group coordinator then places groups among those partitions."""
    client = admin(broker.bootstrap)
    [future] = client.create_topics(
        [NewTopic(OFFSETS, num_partitions=3, replication_factor=1,
                  config={"cleanup.policy": "compact"})]).values()
    future.result(WAIT_S)
    assert topic_shape(broker.bootstrap, OFFSETS) == (3, {1})
    assert topic_configs(broker.bootstrap, OFFSETS)["cleanup.policy"] == "compact"
    create_topic(broker.bootstrap, topic_name)
    assert all(m.error() is None for m in produce_all(
        producer(broker.bootstrap), topic_name, [{"value": b"v", "partition": 0}]))
    group = f"g-{topic_name}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        deadline = time.monotonic() + WAIT_S
        while True:
            [got] = c.committed([TopicPartition(topic_name, 0)], timeout=10)
            if got.offset == 1 or time.monotonic() > deadline:
                break
    finally:
        c.close()
    assert got.offset == 1
    assert topic_shape(broker.bootstrap, OFFSETS) == (3, {1})


PRODUCE, DELETE_RECORDS = 0, 21


def produce_to(bootstrap: str, client_id: str, topic: str) -> dict:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [
            # a key of a version no loader knows (ignored, as Kafka's loaders do)
            {"index": 0, "records": rawclient.build_batch([rawclient.Rec(
                b"forged", key=b"\x7f\xff")])}]}]}
    with ProtoClient(bootstrap, client_id=client_id) as pc:
        [topic_answer] = pc.request(PRODUCE, 8, body)["responses"]  # v8+: error_message
    [answer] = topic_answer["partition_responses"]
    return answer


@pytest.mark.parametrize("name", [OFFSETS, TXN_STATE])
def test_clients_cannot_append_to_or_delete_from_internal_topics(broker: Broker,
                                                                 name: str) -> None:
    """Group offsets and transaction state (producer epochs) are written by their
    coordinators only: a client's Produce is INVALID_TOPIC_EXCEPTION (Kafka's "Cannot
    append to internal topic", its admin tools' client id excepted), DeleteRecords
    too."""
    with rawclient.RawClient(broker.bootstrap) as rc:
        rawclient.metadata_v4(rc, [name], True)
        end = rc.high_watermark(name)
    answer = produce_to(broker.bootstrap, "forger", name)
    assert answer["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION, answer
    assert answer["error_message"] == f"Cannot append to internal topic {name}"
    with ProtoClient(broker.bootstrap) as pc:
        [topic] = pc.request(DELETE_RECORDS, 1, {"timeout_ms": 5000, "topics": [
            {"name": name, "partitions": [{"partition_index": 0, "offset": -1}]}]})["topics"]
    assert topic["partitions"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    with rawclient.RawClient(broker.bootstrap) as rc:
        assert rc.high_watermark(name) == end
    assert produce_to(broker.bootstrap, "__admin_client", name)["error_code"] == 0
