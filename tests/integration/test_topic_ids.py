"""Topic ids (KIP-516) on one broker: Metadata v10+ reports them, Fetch v13+ names topics
by id (UNKNOWN_TOPIC_ID for an id whose topic is gone, also after a re-create under the
same name), ids survive a restart and match partition.metadata."""

from __future__ import annotations

import base64
import time
import uuid
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, TopicPartition

from . import rawclient
from .helpers import METADATA, OP_TIMEOUT_S, admin, create_topic, topic_id, wait_topic
from .protoclient import ProtoClient

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

FETCH = 1
UNKNOWN_TOPIC_ID = 100
ZERO = uuid.UUID(int=0)


def fetch_by_id(pc: ProtoClient, tid: uuid.UUID, version: int = 13) -> dict[str, Any]:
    return pc.request(FETCH, version, {
        "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": 0,
        "session_epoch": -1, "topics": [{"topic_id": tid, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})


def recreate(bootstrap: str, topic_name: str) -> None:
    """Delete the topic and create it again under the same name, retrying the create
    (bounded) while the deletion is still completing."""
    client = admin(bootstrap)
    client.delete_topics([topic_name])[topic_name].result(OP_TIMEOUT_S)
    deadline = time.monotonic() + OP_TIMEOUT_S
    while True:
        try:
            create_topic(bootstrap, topic_name)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_metadata_by_name_and_by_id(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    tid = topic_id(broker.bootstrap, topic_name)
    assert tid != ZERO
    with ProtoClient(broker.bootstrap) as pc:
        by_id = pc.request(METADATA, 12, {"topics": [{"topic_id": tid, "name": None}]})
        (found,) = by_id["topics"]
        assert (found["error_code"], found["name"], len(found["partitions"])) == \
            (0, topic_name, 2)
        missing = pc.request(METADATA, 12, {"topics": [{"topic_id": uuid.uuid4(),
                                                        "name": None}]})
        assert missing["topics"][0]["error_code"] == UNKNOWN_TOPIC_ID
        # v13: the top-level error code
        assert pc.request(METADATA, 13, {"topics": None})["error_code"] == 0


def test_fetch_by_topic_id_and_unknown_after_recreate(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with rawclient.RawClient(broker.bootstrap) as rc:
        assert rc.produce(topic_name, 0, rawclient.build_batch(
            [rawclient.Rec(b"first")]), acks=1).error_code == 0
    old = topic_id(broker.bootstrap, topic_name)
    with ProtoClient(broker.bootstrap) as pc:
        reply = fetch_by_id(pc, old)
        (topic,) = reply["responses"]
        assert topic["topic_id"] == old
        (part,) = topic["partitions"]
        assert (part["error_code"], part["high_watermark"]) == (0, 1)
        assert len(part["records"]) > 0
        assert fetch_by_id(pc, uuid.uuid4())["responses"][0]["partitions"][0][
            "error_code"] == UNKNOWN_TOPIC_ID

    recreate(broker.bootstrap, topic_name)
    new = topic_id(broker.bootstrap, topic_name)
    assert new not in (old, ZERO)
    with ProtoClient(broker.bootstrap) as pc:
        stale = fetch_by_id(pc, old, version=16)
        (part,) = stale["responses"][0]["partitions"]
        assert part["error_code"] == UNKNOWN_TOPIC_ID
        fresh = fetch_by_id(pc, new, version=16)
        (part,) = fresh["responses"][0]["partitions"]
        assert (part["error_code"], part["high_watermark"]) == (0, 0)


def test_topic_ids_survive_restart(broker_factory: BrokerFactory) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, "kept", partitions=2)
    before = topic_id(b.bootstrap, "kept")
    encoded = base64.urlsafe_b64encode(before.bytes).decode().rstrip("=")
    for index in range(2):
        assert (b.data_dir / f"kept-{index}" / "partition.metadata").read_text() == \
            f"version: 0\ntopic_id: {encoded}\n"
    b.restart()
    assert topic_id(b.bootstrap, "kept") == before


def test_librdkafka_consumes_with_topic_ids(broker: Broker, topic_name: str) -> None:
    """librdkafka sends Fetch v16 with topic ids from Metadata v13."""
    create_topic(broker.bootstrap, topic_name)
    with rawclient.RawClient(broker.bootstrap) as rc:
        assert rc.produce(topic_name, 0, rawclient.build_batch(
            [rawclient.Rec(b"a"), rawclient.Rec(b"b")]), acks=1).error_code == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + OP_TIMEOUT_S
        while len(got) < 2 and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=10, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
        assert got == [b"a", b"b"]
    finally:
        consumer.close()


CREATE_TOPICS = 19
DELETE_TOPICS = 20
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42


def test_create_topics_returns_the_id_and_delete_topics_takes_it(broker: Broker,
                                                                 topic_name: str) -> None:
    with ProtoClient(broker.bootstrap) as pc:
        created = pc.request(CREATE_TOPICS, 7, {"topics": [{
            "name": topic_name, "num_partitions": 2, "replication_factor": 1,
            "assignments": [], "configs": [{"name": "retention.ms", "value": "3600000"}]}],
            "timeout_ms": 10000})
        (topic,) = created["topics"]
        assert topic["error_code"] == 0, topic
        tid = topic["topic_id"]
        # answered once written (Kafka 4.0): Metadata has it once its leaders are up
        wait_topic(broker.bootstrap, topic_name, 2)
        assert tid == topic_id(broker.bootstrap, topic_name) != ZERO
        assert (topic["num_partitions"], topic["replication_factor"]) == (2, 1)
        # every effective config comes back (as Kafka), the one given as a topic override
        configs = {c["name"]: (c["value"], c["config_source"]) for c in topic["configs"]}
        assert configs["retention.ms"] == ("3600000", 1)  # DYNAMIC_TOPIC_CONFIG

        unknown = pc.request(DELETE_TOPICS, 6, {"topics": [{"name": None,
                                                            "topic_id": uuid.uuid4()}],
                                                "timeout_ms": 10000})
        assert unknown["responses"][0]["error_code"] == UNKNOWN_TOPIC_ID
        both = pc.request(DELETE_TOPICS, 6, {"topics": [{"name": topic_name,
                                                         "topic_id": tid}],
                                             "timeout_ms": 10000})
        assert both["responses"][0]["error_code"] == INVALID_REQUEST
        deleted = pc.request(DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": tid}],
                                                "timeout_ms": 10000})
        (answer,) = deleted["responses"]
        assert (answer["error_code"], answer["name"]) == (0, topic_name)
        assert answer["topic_id"] == tid
        gone = pc.request(3, 12, {"topics": [{"name": topic_name}],
                                  "allow_auto_topic_creation": False})
        assert gone["topics"][0]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION


def test_incremental_session_by_id_sees_a_recreated_topic_as_unknown(
        broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    old = topic_id(broker.bootstrap, topic_name)
    with ProtoClient(broker.bootstrap) as pc:
        full = pc.request(FETCH, 13, {
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": 0,
            "session_epoch": 0, "topics": [{"topic_id": old, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
        session = full["session_id"]
        assert session > 0
        recreate(broker.bootstrap, topic_name)
        with rawclient.RawClient(broker.bootstrap) as rc:
            assert rc.produce(topic_name, 0, rawclient.build_batch(
                [rawclient.Rec(b"new topic")]), acks=1).error_code == 0
        reply = pc.request(FETCH, 13, {
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": session,
            "session_epoch": 1, "topics": []})
        assert reply["error_code"] == 0
        (topic,) = reply["responses"]
        assert topic["topic_id"] == old
        (part,) = topic["partitions"]
        assert (part["error_code"], len(part["records"])) == (UNKNOWN_TOPIC_ID, 0)
