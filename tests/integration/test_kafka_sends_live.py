"""pybroker's answers hold what Kafka's broker sends in every nullable or defaulted
response field (tests/protocol/kafka_sends.py): real clients (confluent-kafka's admin,
producers and consumers, kafka-python's admin) and raw requests at every advertised
version go through a recording proxy to one broker; every answer is decoded and each
such field checked against its entry. Null only where Kafka sends null, "" only where
Kafka sends "", a default only where Kafka leaves it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pybroker import protocol
from pybroker.protocol import APIS, Field
from tests.conftest import free_port
from tests.protocol.kafka_sends import TABLE, At

from .helpers import OP_TIMEOUT_S, create_topic
from .protoclient import ProtoClient
from .recording_proxy import Exchange, RecordingProxy

if TYPE_CHECKING:
    from conftest import BrokerFactory

RACK = "rack-a"
CREATE_TOPICS = 19

#: entries no request of this test reaches, and why
NOT_LIVE: dict[tuple[str, str], str] = {
    ("Produce", "responses.partition_responses.record_errors.batch_index_error_message"):
        "record errors need a batch the broker refuses per record (test_record_validation)",
    ("SaslAuthenticate", "error_message"): "needs a SASL listener (tests/security)",
    ("Fetch", "node_endpoints.rack"):
        "only sent with a leader hint, on a cluster: tests/cluster/test_leader_hints.py",
    ("Produce", "node_endpoints.rack"):
        "only sent with a leader hint, on a cluster: tests/cluster/test_leader_hints.py",
    ("DescribeProducers", "topics.partitions.active_producers.current_txn_start_offset"):
        "seen only while a producer of the partition is active",
}


#: entries known to differ until work in progress lands (their mismatches are not
#: counted); drop an entry when its fix is on main, and its check counts again
PENDING: dict[tuple[str, str], str] = {}


def _fields_seen(fields: Sequence[Field], body: dict[str, Any], version: int, api: str,
                 path: str, scope: list[dict[str, Any]],
                 ) -> Iterator[tuple[tuple[str, str], Any, list[dict[str, Any]]]]:
    for f in fields:
        if not f.present(version):
            continue
        name = f"{path}{f.name}"
        value = body.get(f.name)
        inner = [body, *scope]
        if (api, name) in TABLE:
            yield (api, name), value, inner
        if f.fields and value is not None:
            items = value if f.is_struct_array else [value]
            for item in items:
                yield from _fields_seen(f.fields, item, version, api, f"{name}.", inner)


def _ok_scope(scope: list[dict[str, Any]]) -> dict[str, Any]:
    """The innermost struct with an error_code decides whether the value is an error's."""
    for struct in scope:
        if "error_code" in struct:
            return struct
    return scope[0]


def check_exchanges(exchanges: list[Exchange],
                    ) -> tuple[list[tuple[tuple[str, str], str]], set[tuple[str, str]]]:
    """(mismatches as (entry, description), entries seen) over every decodable answer."""
    bad: list[tuple[tuple[str, str], str]] = []
    seen: set[tuple[str, str]] = set()
    for ex in exchanges:
        api = APIS.get(ex.api_key)
        if api is None or not api.supports(ex.api_version):
            continue
        try:
            _, request = protocol.decode_request(ex.request)
            _, body = protocol.decode_response(ex.api_key, ex.api_version, ex.response)
        except protocol.ProtocolError:
            continue
        version = ex.api_version
        if ex.api_key == 18 and body.get("error_code"):
            version = 0
        for key, value, scope in _fields_seen(api.response, body, version, api.name, "", []):
            seen.add(key)
            parent = scope[0]
            if "error_code" not in parent:
                parent = {**parent, "error_code": _ok_scope(scope).get("error_code", 0)}
            at = At(value=value, parent=parent, request=request, version=version, rack=RACK)
            if not TABLE[key].check(at):
                bad.append((key, f"{api.name} v{version} {key[1]} = {value!r} "
                                 f"[client {request_client(ex)}] "
                                 f"(Kafka: {TABLE[key].kafka}); in {scope[0]!r:.300}"))
    return bad, seen


def request_client(ex: Exchange) -> str | None:
    return protocol.decode_request_header(memoryview(ex.request))[0].client_id


# ------------------------------------------------------------------ the workload


def clients(bootstrap: str, topic: str) -> None:
    """confluent-kafka's admin, producers (idempotent, transactional) and consumers
    (classic and KIP-848 groups, read_committed), kafka-python's admin."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    t = OP_TIMEOUT_S

    def settle(futures: dict[Any, Any]) -> None:
        for f in futures.values():
            try:
                f.result(t)
            except KafkaException:
                pass  # errors are answers too: their fields are checked as well

    other = f"{topic}-other"
    settle(admin.create_topics([NewTopic(other, 2, 1), NewTopic(topic, 1, 1)],
                               operation_timeout=t, request_timeout=t))
    settle(admin.create_topics([NewTopic(f"{topic}-valid", 2, 1)], validate_only=True,
                               request_timeout=t))
    settle(admin.create_partitions([NewPartitions(other, 3)], request_timeout=t))
    settle(admin.create_partitions([NewPartitions(other, 1)], request_timeout=t))
    settle(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic),
                                   ConfigResource(ResourceType.BROKER, "0"),
                                   ConfigResource(ResourceType.TOPIC, f"{topic}-missing")],
                                  request_timeout=t))
    settle(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, other, incremental_configs=[ConfigEntry(
            "retention.ms", "86400000",
            incremental_operation=AlterConfigOpType.SET)])], request_timeout=t))
    admin.describe_cluster(request_timeout=t).result(t)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(5):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(t) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn"})
    txn.init_transactions(t)
    txn.begin_transaction()
    txn.produce(topic, value=b"aborted")
    txn.abort_transaction(t)
    txn.begin_transaction()
    txn.produce(topic, value=b"committed")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        txn.send_offsets_to_transaction([TopicPartition(topic, 0, 1)],
                                        consumer.consumer_group_metadata(), t)
        txn.commit_transaction(t)
        got = 0
        while got < 5 and time.monotonic() < deadline:
            got += len([m for m in consumer.consume(10, timeout=0.5) if m.error() is None])
        consumer.commit(asynchronous=False)
        consumer.committed([TopicPartition(topic, 0)], timeout=t)
    finally:
        consumer.close()
    modern = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-848",
                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        modern.subscribe([topic])
        deadline = time.monotonic() + 30
        while not modern.assignment() and time.monotonic() < deadline:
            modern.poll(0.2)
        settle(admin.describe_consumer_groups([f"{topic}-848", f"{topic}-g"],
                                              request_timeout=t))
    finally:
        modern.close()
    admin.list_consumer_groups(request_timeout=t).result(t)
    settle(admin.list_consumer_group_offsets(
        [__import__("confluent_kafka").ConsumerGroupTopicPartitions(f"{topic}-g")],
        request_timeout=t))
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest(), OffsetSpec.max_timestamp(),
                 OffsetSpec.for_timestamp(0), OffsetSpec.for_timestamp(2**50)):
        settle(admin.list_offsets({TopicPartition(topic, 0): spec}, request_timeout=t))
    settle(admin.delete_records([TopicPartition(other, 0, 0)], request_timeout=t))
    acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:a", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
    settle(admin.create_acls([acl], request_timeout=t))
    settle({0: admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY), request_timeout=t)})
    settle(admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
        AclPermissionType.ANY)], request_timeout=t))
    settle(admin.delete_consumer_groups([f"{topic}-none"], request_timeout=t))
    settle(admin.delete_topics([other, f"{topic}-missing"], operation_timeout=t,
                               request_timeout=t))

    from kafka.admin import KafkaAdminClient
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(t * 1000))
    try:
        kp.describe_log_dirs()
        kp.describe_configs([__import__("kafka.admin", fromlist=["ConfigResource"])
                             .ConfigResource("TOPIC", topic)], include_synonyms=True)
    finally:
        kp.close()


def raw_requests(bootstrap: str, topic: str, advertised: dict[int, tuple[int, int]]) -> None:
    """Requests no client above sends, each at every advertised version of its API."""
    def fetch(isolation_level: int, offset: int = 0) -> dict[str, Any]:
        return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "topic_id": uuid.UUID(int=0), "partitions": [
                    {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                     "current_leader_epoch": -1, "last_fetched_epoch": -1,
                     "log_start_offset": -1} for p in (0, 9)]}],
                "forgotten_topics_data": [], "rack_id": ""}

    member = str(uuid.uuid4())
    missing_id = uuid.uuid4()
    probes: list[tuple[int, dict[str, Any]]] = [
        (3, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)},
                        {"name": f"{topic}-nope", "topic_id": uuid.UUID(int=0)}],
             "allow_auto_topic_creation": False}),
        (3, {"topics": [{"name": None, "topic_id": missing_id}]}),
        (75, {"topics": [{"name": topic}, {"name": f"{topic}-nope"}],
              "response_partition_limit": 100, "cursor": None}),
        (10, {"key": f"{topic}-g", "key_type": 0, "coordinator_keys": [f"{topic}-g"]}),
        (10, {"key": f"{topic}-txn", "key_type": 1, "coordinator_keys": [f"{topic}-txn"]}),
        (10, {"key": "", "key_type": 5, "coordinator_keys": [""]}),
    ] + [
        (2, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts},
        ]}, {"name": f"{topic}-nope", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        for ts in (-1, -2, 0)
    ] + [
        (0, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": f"{topic}-nope", "partition_data": [{"index": 0, "records": None}]}]}),
        (23, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
            {"partition": 7, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
        (22, {"transactional_id": None, "transaction_timeout_ms": 60000,
              "producer_id": -1, "producer_epoch": -1}),
        (22, {"transactional_id": f"{topic}-init", "transaction_timeout_ms": 60000,
              "producer_id": -1, "producer_epoch": -1}),
        (11, {"group_id": f"{topic}-raw", "session_timeout_ms": 10000,
              "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
              "protocol_type": "consumer", "protocols": [{"name": "range",
                                                          "metadata": b""}]}),
        (13, {"group_id": f"{topic}-raw", "member_id": member,
              "members": [{"member_id": member, "group_instance_id": None},
                          {"member_id": "", "group_instance_id": "static-1"}]}),
        (15, {"groups": [f"{topic}-g", f"{topic}-raw"],
              "include_authorized_operations": False}),
        (9, {"group_id": f"{topic}-g", "topics": None, "require_stable": False,
             "groups": [{"group_id": f"{topic}-g", "topics": None}]}),
        (9, {"group_id": f"{topic}-none", "topics": [{"name": topic,
                                                       "partition_indexes": [0]}],
             "groups": [{"group_id": f"{topic}-none", "topics": [
                 {"name": topic, "partition_indexes": [0]}]}]}),
        (35, {"topics": None}),
        (46, {"timeout_ms": 5000, "topics": None}),
        (45, {"timeout_ms": 5000, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "replicas": None}]}]}),
        (43, {"election_type": 0, "topic_partitions": [{"topic": topic, "partitions": [0]}],
              "timeout_ms": 5000}),
        (49, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": name}],
                           "ops": [{"key": "producer_byte_rate", "value": 1e9,
                                    "remove": False}]} for name in (None, "c1")],
              "validate_only": False}),
        (48, {"components": [], "strict": False}),
        (51, {"deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": [
            {"name": "alice", "mechanism": 1, "iterations": 4096, "salt": b"salt",
             "salted_password": b"p" * 32}]}),
        (50, {"users": [{"name": "alice"}, {"name": "nobody"}]}),
        (33, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": []}],
              "validate_only": True}),
        (60, {"include_cluster_authorized_operations": False, "endpoint_type": 1}),
        (61, {"topics": [{"name": topic, "partition_indexes": [0, 5]}]}),
        (65, {"transactional_ids": [f"{topic}-txn", f"{topic}-none"]}),
        (66, {"state_filters": [], "producer_id_filters": []}),
        (16, {"states_filter": [], "types_filter": []}),
        (69, {"group_ids": [f"{topic}-848", f"{topic}-none"],
              "include_authorized_operations": False}),
        (68, {"group_id": f"{topic}-848", "member_id": "", "member_epoch": 0,
              "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 10000,
              "subscribed_topic_names": [topic], "server_assignor": None,
              "topic_partitions": []}),
        (68, {"group_id": f"{topic}-848", "member_id": "unknown", "member_epoch": 5,
              "instance_id": None, "rack_id": None, "rebalance_timeout_ms": -1,
              "subscribed_topic_names": None, "server_assignor": None,
              "topic_partitions": None}),
        (20, {"topic_names": [f"{topic}-nope"], "timeout_ms": 5000,
              "topics": [{"name": None, "topic_id": missing_id}]}),
        (32, {"resources": [{"resource_type": 2, "resource_name": topic,
                             "configuration_keys": None}],
              "include_synonyms": True, "include_documentation": True}),
        (18, {"client_software_name": "t", "client_software_version": "1"}),
    ]
    # (the last one past the log end: OFFSET_OUT_OF_RANGE)
    probes += [(1, fetch(level)) for level in (0, 1)] + [(1, fetch(1, 10**12))]
    with ProtoClient(bootstrap) as pc:
        for api_key, body in probes:
            low, high = advertised[api_key]
            for version in range(low, high + 1):
                if api_key == 0 and version < 3:
                    continue  # Produce v0-2 are advertised (KAFKA-18659) but refused
                pc.request(api_key, version, body)
        low, high = advertised[CREATE_TOPICS]
        for version in range(low, high + 1):
            # a new topic per version (its answer carries the topic's configs from v5),
            # then the same again (TOPIC_ALREADY_EXISTS)
            body = {"topics": [{"name": f"{topic}-v{version}", "num_partitions": 1,
                                "replication_factor": 1, "assignments": [], "configs": []}],
                    "timeout_ms": 10000, "validate_only": False}
            pc.request(CREATE_TOPICS, version, {**body, "validate_only": True})
            pc.request(CREATE_TOPICS, version, body)
            pc.request(CREATE_TOPICS, version, body)


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    with ProtoClient(bootstrap) as pc:
        reply = pc.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in reply["api_keys"]}


def test_answers_hold_what_kafka_sends(broker_factory: BrokerFactory) -> None:
    port = free_port()
    proxy = RecordingProxy(port).start()
    try:
        b = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                            "group.initial.rebalance.delay.ms": 0, "broker.rack": RACK,
                            # ACL answers past SECURITY_DISABLED (this client is super)
                            "authorizer.class.name":
                                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                            "super.users": "User:ANONYMOUS",
                            "transaction.state.log.replication.factor": 1,
                            "offsets.topic.replication.factor": 1})
        proxy.target = ("127.0.0.1", b.port)
        topic = "sends"
        create_topic(b.bootstrap, topic)
        clients(proxy.bootstrap, topic)
        raw_requests(proxy.bootstrap, topic, advertised(b.bootstrap))
        exchanges = proxy.exchanges()
    finally:
        proxy.close()
    bad, seen = check_exchanges(exchanges)
    unexpected = sorted({text for key, text in bad if key not in PENDING})
    unseen = sorted(set(TABLE) - seen - set(NOT_LIVE))
    assert not unexpected and not unseen, (
        "answers differing from what Kafka sends:\n" + "\n".join(unexpected)
        + f"\nentries no answer of this test reached: {unseen}")
    assert not (set(NOT_LIVE) | set(PENDING)) - set(TABLE)
