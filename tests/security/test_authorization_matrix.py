"""Authorization of every API version the broker advertises, driven by its ApiVersions
table: each (API, version) that names a topic, group, transactional id or the cluster
(by name or by id) has rows below, and for each row a principal without the permission
gets Kafka's error and none of the data, while one with it gets past the authorizer.
An advertised (API, version) with no row, and not listed in NAMES_NO_RESOURCE, fails
test_every_advertised_version_has_a_row: a new API or version must say how it is
authorized.

One SASL_PLAINTEXT broker for the module; requests go through the project's own codec
(ProtoClient), so every version is sent as written. Principals: admin (super user, sets
things up), alice (gets each row's permission on the row's resources), carol (gets the
cluster permissions), bob (gets the row's `partial` permissions only: the ones that must
not be enough, e.g. WRITE and DESCRIBE for a Fetch), eve (nothing at all). Each row has
its own resource names (prefix `m<row>-`), so rows do not lend each other permissions."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from pybroker.handlers.registry import HANDLERS
from pybroker.server.dispatch import api_versions_body
from tests.conftest import Broker, external_bootstrap, free_port
from tests.integration.protoclient import ProtoClient

TIMEOUT_S = 30.0
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{u}-pw"' for u in ("admin", "alice", "bob", "carol", "eve"))
        + ";")

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
AUTH_CODES = {TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED}
UNKNOWN_TOPIC_ID = 100

#: APIs that name no resource an ACL guards (Kafka authorizes none of them)
NAMES_NO_RESOURCE = {
    17: "SaslHandshake: before authentication",
    18: "ApiVersions: before authentication",
    36: "SaslAuthenticate: before authentication",
    60: "DescribeCluster: brokers and cluster id; Kafka asks for no permission",
}

# ACL codes on the wire (resource, pattern, operation, permission types)
WIRE_TOPIC, WIRE_LITERAL, WIRE_READ, WIRE_ALLOW, WIRE_ANY = 2, 3, 3, 3, 1


@dataclasses.dataclass(frozen=True)
class Names:
    """A row's resources for one version."""

    topic: str
    group: str
    txn: str
    topic_id: uuid.UUID | None  # the Metadata answer's (None: the row has no topic)
    broker_id: int


Body = Callable[[Names, int], dict[str, Any]]
Codes = Callable[[dict[str, Any], int], list[int]]
Data = Callable[[dict[str, Any], int], bool]


@dataclasses.dataclass(frozen=True)
class Row:
    api: int
    what: str
    #: (resource type, operation) the allowed principal gets on the row's resources
    grant: tuple[tuple[str, str], ...]
    #: the denial's error code (TOPIC_DENIED, ...)
    code: int
    body: Body
    #: the error codes of the answer's parts that name the row's resources
    codes: Codes
    #: whether the answer carries the resource's data (records, offsets, configs, ...)
    data: Data = lambda r, v: False
    #: what the denied principal has on the row's resources (must not be enough)
    partial: tuple[tuple[str, str], ...] = ()
    #: limits the versions (forms that exist only from a version on)
    versions: tuple[int, int] | None = None
    #: the request changes its resource: one per version
    per_version: bool = False
    #: the row's topic exists, with one record, and its group has a committed offset
    setup: bool = False
    denied_by: str = "bob"
    #: the allowed answer must carry the data too (not only get past the authorizer)
    allowed_data: bool = True

    @property
    def allowed_by(self) -> str:
        return "carol" if any(r == "cluster" for r, _ in self.grant) else "alice"


def _parts(key: str, sub: str, code: str = "error_code") -> Codes:
    return lambda r, v: [p[code] for t in r[key] for p in t[sub]]


def _top(r: dict[str, Any], v: int) -> list[int]:
    return [r["error_code"]]


def _entries(key: str) -> Codes:
    return lambda r, v: [e["error_code"] for e in r[key]]


def _fetch_body(follower: bool) -> Body:
    def body(n: Names, v: int) -> dict[str, Any]:
        replica = 7 if follower else -1
        return {"replica_id": replica,
                "replica_state": {"replica_id": replica, "replica_epoch": -1},
                "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": n.topic, "topic_id": n.topic_id, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}
    return body


def _fetched(r: dict[str, Any], v: int) -> bool:
    return any(p["records"] for t in r["responses"] for p in t["partitions"])


def _produce(txn: bool) -> Body:
    return lambda n, v: {"transactional_id": n.txn if txn else None, "acks": 1,
                         "timeout_ms": 5000, "topic_data": [{"name": n.topic, "partition_data": [
                             {"index": 0, "records": _records()}]}]}


def _records() -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"m", headers=[])
    return bytes(builder.build())


def _offset_commit(n: Names, v: int) -> dict[str, Any]:
    return {"group_id": n.group, "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": -1, "topics": [{"name": n.topic, "partitions": [
                {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}]}


def _offset_fetch(n: Names, v: int) -> dict[str, Any]:
    topics = [{"name": n.topic, "partition_indexes": [0]}]
    return {"group_id": n.group, "topics": topics,
            "groups": [{"group_id": n.group, "topics": topics}], "require_stable": False}


def _offset_fetch_codes(kind: str) -> Codes:
    def codes(r: dict[str, Any], v: int) -> list[int]:
        if v >= 8:
            (g,) = r["groups"]
            if kind == "group":
                return [g["error_code"]]
            return [p["error_code"] for t in g["topics"] for p in t["partitions"]]
        if kind == "group" and v >= 2:
            return [r["error_code"]]
        return [p["error_code"] for t in r["topics"] for p in t["partitions"]]
    return codes


def _committed(r: dict[str, Any], v: int) -> bool:
    topics = r["groups"][0]["topics"] if v >= 8 else r["topics"]
    return any(p["committed_offset"] >= 0 for t in topics for p in t["partitions"])


def _txn_offset_commit(n: Names, v: int) -> dict[str, Any]:
    return {"transactional_id": n.txn, "group_id": n.group, "producer_id": 999_999,
            "producer_epoch": 0, "generation_id": -1, "member_id": "",
            "topics": [{"name": n.topic, "partitions": [
                {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}]}


def _add_partitions(n: Names, v: int) -> dict[str, Any]:
    return {"v3_and_below_transactional_id": n.txn, "v3_and_below_producer_id": 999_999,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": n.topic, "partitions": [0]}]}


def _configs(resource_type: int, alter: bool, incremental: bool = False) -> Body:
    def body(n: Names, v: int) -> dict[str, Any]:
        name = n.topic if resource_type == 2 else str(n.broker_id)
        configs: list[dict[str, Any]] = []
        if alter and resource_type == 2:
            configs = [{"name": "retention.ms", "value": "86400000", "config_operation": 0}]
        resource = {"resource_type": resource_type, "resource_name": name, "configs": configs,
                    "configuration_keys": None}
        return {"resources": [resource], "validate_only": True, "include_synonyms": False,
                "include_documentation": False}
    return body


def _describe_configs_data(r: dict[str, Any], v: int) -> bool:
    return any(res["configs"] for res in r["results"])


def _group_join(n: Names, v: int) -> dict[str, Any]:
    return {"group_id": n.group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
            "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}


def _member(n: Names, v: int) -> dict[str, Any]:
    return {"group_id": n.group, "generation_id": 1, "member_id": "m-1",
            "members": [{"member_id": "m-1"}], "assignments": []}


def _topic_partition(key: str = "topics", name: str = "name", parts: str = "partitions",
                     **fields: Any) -> Body:
    def body(n: Names, v: int) -> dict[str, Any]:
        return {key: [{name: n.topic, parts: [{"partition_index": 0, **fields}]}],
                "timeout_ms": 5000, "replica_id": -1, "isolation_level": 0}
    return body


def _metadata(by_id: bool) -> Body:
    def body(n: Names, v: int) -> dict[str, Any]:
        topic = {"name": None, "topic_id": n.topic_id} if by_id else {"name": n.topic}
        return {"topics": [topic], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
    return body


def _metadata_codes(r: dict[str, Any], v: int) -> list[int]:
    return [t["error_code"] for t in r["topics"]] or [-1]  # left out is not an answer


def _producer_id(txn: bool) -> Body:
    return lambda n, v: {"transactional_id": n.txn if txn else None,
                         "transaction_timeout_ms": 60_000, "producer_id": -1,
                         "producer_epoch": -1}


def _txn_call(**fields: Any) -> Body:
    return lambda n, v: {"transactional_id": n.txn, "producer_id": 999_999,
                         "producer_epoch": 0, "group_id": n.group, **fields}


def _acl_body(n: Names, v: int) -> dict[str, Any]:
    acl = {"resource_type": WIRE_TOPIC, "resource_name": f"zz-{n.topic}",
           "resource_pattern_type": WIRE_LITERAL, "principal": "User:nobody", "host": "*",
           "operation": WIRE_READ, "permission_type": WIRE_ALLOW}
    flt = {"resource_type_filter": WIRE_TOPIC, "resource_name_filter": f"zz-{n.topic}",
           "pattern_type_filter": WIRE_LITERAL, "principal_filter": None, "host_filter": None,
           "operation": WIRE_ANY, "permission_type": WIRE_ANY}
    return {"creations": [acl], "filters": [flt], "resource_type_filter": WIRE_ANY,
            "resource_name_filter": None, "pattern_type_filter": WIRE_ANY,
            "principal_filter": None, "host_filter": None, "operation": WIRE_ANY,
            "permission_type": WIRE_ANY}


def _cgh(n: Names, v: int) -> dict[str, Any]:
    return {"group_id": n.group, "member_id": uuid.uuid4().hex if v >= 1 else "",
            "member_epoch": 0, "rebalance_timeout_ms": 10_000,
            "subscribed_topic_names": [n.topic], "topic_partitions": []}


T, G, X, C = "topic", "group", "txn", "cluster"

ROWS: list[Row] = [
    # --- records ---------------------------------------------------------------------
    Row(0, "topic WRITE", ((T, "WRITE"),), TOPIC_DENIED, _produce(False),
        _parts("responses", "partition_responses"),
        data=lambda r, v: all(c == 0 for c in _parts("responses", "partition_responses")(r, v)),
        partial=((T, "READ"), (T, "DESCRIBE")), versions=(3, 99), setup=True),
    Row(0, "transactional id WRITE", ((T, "WRITE"), (X, "WRITE")), TXN_DENIED, _produce(True),
        _parts("responses", "partition_responses"),
        partial=((T, "WRITE"),), versions=(3, 99), setup=True, allowed_data=False),
    Row(1, "topic READ (by name to v12, by id from v13)", ((T, "READ"),), TOPIC_DENIED,
        _fetch_body(False), _parts("responses", "partitions"), data=_fetched,
        partial=((T, "WRITE"), (T, "DESCRIBE")), setup=True),
    Row(1, "cluster CLUSTER_ACTION (follower fetch)", ((C, "CLUSTER_ACTION"),), TOPIC_DENIED,
        _fetch_body(True), _parts("responses", "partitions"), data=_fetched,
        partial=((T, "READ"),), setup=True, allowed_data=False),
    Row(2, "topic DESCRIBE", ((T, "DESCRIBE"),), TOPIC_DENIED,
        _topic_partition(timestamp=-1, current_leader_epoch=-1),
        _parts("topics", "partitions"),
        data=lambda r, v: any(p["offset"] >= 0 for t in r["topics"] for p in t["partitions"]),
        setup=True),
    Row(3, "topic DESCRIBE (by name)", ((T, "DESCRIBE"),), TOPIC_DENIED, _metadata(False),
        _metadata_codes, data=lambda r, v: any(t["partitions"] for t in r["topics"]),
        setup=True),
    Row(3, "topic DESCRIBE (by id)", ((T, "DESCRIBE"),), TOPIC_DENIED, _metadata(True),
        _metadata_codes, data=lambda r, v: any(t["partitions"] or t["name"]
                                               for t in r["topics"]),
        versions=(12, 99), setup=True),
    Row(23, "topic DESCRIBE", ((T, "DESCRIBE"),), TOPIC_DENIED,
        lambda n, v: {"replica_id": -1, "topics": [{"topic": n.topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        _parts("topics", "partitions"),
        data=lambda r, v: any(p["end_offset"] >= 0 for t in r["topics"]
                              for p in t["partitions"]), setup=True),
    Row(23, "cluster CLUSTER_ACTION (or topic DESCRIBE)", ((C, "CLUSTER_ACTION"),),
        TOPIC_DENIED,
        lambda n, v: {"replica_id": 7, "topics": [{"topic": n.topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        _parts("topics", "partitions"), setup=True, allowed_data=False),
    Row(21, "topic DELETE", ((T, "DELETE"),), TOPIC_DENIED,
        _topic_partition(offset=0), _parts("topics", "partitions"),
        partial=((T, "READ"), (T, "WRITE")), setup=True, allowed_data=False),
    Row(61, "topic READ", ((T, "READ"),), TOPIC_DENIED,
        lambda n, v: {"topics": [{"name": n.topic, "partition_indexes": [0]}]},
        _parts("topics", "partitions"), setup=True, allowed_data=False),
    Row(75, "topic DESCRIBE", ((T, "DESCRIBE"),), TOPIC_DENIED,
        lambda n, v: {"topics": [{"name": n.topic}], "response_partition_limit": 100,
                      "cursor": None},
        _metadata_codes, data=lambda r, v: any(t["partitions"] for t in r["topics"]),
        setup=True),
    # --- topic administration ----------------------------------------------------------
    Row(19, "topic CREATE", ((T, "CREATE"),), TOPIC_DENIED,
        lambda n, v: {"topics": [{"name": n.topic, "num_partitions": 1,
                                  "replication_factor": 1, "assignments": [], "configs": []}],
                      "timeout_ms": 5000, "validate_only": True},
        _entries("topics"), partial=((T, "DESCRIBE"),), per_version=True, allowed_data=False),
    Row(19, "cluster CREATE", ((C, "CREATE"),), TOPIC_DENIED,
        lambda n, v: {"topics": [{"name": n.topic, "num_partitions": 1,
                                  "replication_factor": 1, "assignments": [], "configs": []}],
                      "timeout_ms": 5000, "validate_only": True},
        _entries("topics"), per_version=True, allowed_data=False),
    Row(20, "topic DELETE (by name)", ((T, "DELETE"),), TOPIC_DENIED,
        lambda n, v: {"topic_names": [n.topic], "topics": [{"name": n.topic}],
                      "timeout_ms": 5000},
        _entries("responses"), partial=((T, "DESCRIBE"), (T, "WRITE")), per_version=True,
        setup=True, allowed_data=False),
    Row(20, "topic DELETE (by id)", ((T, "DELETE"),), TOPIC_DENIED,
        lambda n, v: {"topics": [{"name": None, "topic_id": n.topic_id}], "timeout_ms": 5000},
        _entries("responses"), partial=((T, "DESCRIBE"), (T, "WRITE")), versions=(6, 99),
        per_version=True, setup=True, allowed_data=False),
    Row(37, "topic ALTER", ((T, "ALTER"),), TOPIC_DENIED,
        lambda n, v: {"topics": [{"name": n.topic, "count": 2, "assignments": None}],
                      "timeout_ms": 5000, "validate_only": True},
        _entries("results"), partial=((T, "DESCRIBE"),), setup=True, allowed_data=False),
    Row(32, "topic DESCRIBE_CONFIGS", ((T, "DESCRIBE_CONFIGS"),), TOPIC_DENIED,
        _configs(2, False), _entries("results"), data=_describe_configs_data,
        partial=((T, "DESCRIBE"),), setup=True),
    Row(32, "cluster DESCRIBE_CONFIGS (broker)", ((C, "DESCRIBE_CONFIGS"),), CLUSTER_DENIED,
        _configs(4, False), _entries("results"), data=_describe_configs_data),
    Row(33, "topic ALTER_CONFIGS", ((T, "ALTER_CONFIGS"),), TOPIC_DENIED,
        _configs(2, True), _entries("responses"), partial=((T, "DESCRIBE_CONFIGS"),),
        setup=True, allowed_data=False),
    Row(33, "cluster ALTER_CONFIGS (broker)", ((C, "ALTER_CONFIGS"),), CLUSTER_DENIED,
        _configs(4, True), _entries("responses"), allowed_data=False),
    Row(44, "topic ALTER_CONFIGS", ((T, "ALTER_CONFIGS"),), TOPIC_DENIED,
        _configs(2, True, True), _entries("responses"), partial=((T, "DESCRIBE_CONFIGS"),),
        setup=True, allowed_data=False),
    Row(44, "cluster ALTER_CONFIGS (broker)", ((C, "ALTER_CONFIGS"),), CLUSTER_DENIED,
        _configs(4, True, True), _entries("responses"), allowed_data=False),
    # --- consumer groups ---------------------------------------------------------------
    Row(8, "group READ", ((G, "READ"), (T, "READ")), GROUP_DENIED, _offset_commit,
        _parts("topics", "partitions"), partial=((T, "READ"), (G, "DESCRIBE")), setup=True,
        allowed_data=False),
    Row(8, "topic READ", ((G, "READ"), (T, "READ")), TOPIC_DENIED, _offset_commit,
        _parts("topics", "partitions"), partial=((G, "READ"), (T, "DESCRIBE")), setup=True,
        allowed_data=False),
    Row(9, "group DESCRIBE", ((G, "DESCRIBE"), (T, "DESCRIBE")), GROUP_DENIED, _offset_fetch,
        _offset_fetch_codes("group"), data=_committed, partial=((T, "DESCRIBE"),),
        setup=True),
    Row(9, "topic DESCRIBE", ((G, "DESCRIBE"), (T, "DESCRIBE")), TOPIC_DENIED, _offset_fetch,
        _offset_fetch_codes("topic"), data=_committed, partial=((G, "DESCRIBE"),),
        setup=True),
    Row(10, "group DESCRIBE", ((G, "DESCRIBE"),), GROUP_DENIED,
        lambda n, v: {"key": n.group, "key_type": 0}, _top, allowed_data=False),
    Row(10, "transactional id DESCRIBE", ((X, "DESCRIBE"),), TXN_DENIED,
        lambda n, v: {"key": n.txn, "key_type": 1}, _top, versions=(1, 99),
        allowed_data=False),
    Row(11, "group READ", ((G, "READ"),), GROUP_DENIED, _group_join, _top,
        partial=((G, "DESCRIBE"),), per_version=True, allowed_data=False),
    Row(12, "group READ", ((G, "READ"),), GROUP_DENIED, _member, _top,
        partial=((G, "DESCRIBE"),), allowed_data=False),
    Row(13, "group READ", ((G, "READ"),), GROUP_DENIED, _member, _top,
        partial=((G, "DESCRIBE"),), allowed_data=False),
    Row(14, "group READ", ((G, "READ"),), GROUP_DENIED, _member, _top,
        partial=((G, "DESCRIBE"),), allowed_data=False),
    Row(15, "group DESCRIBE", ((G, "DESCRIBE"),), GROUP_DENIED,
        lambda n, v: {"groups": [n.group], "include_authorized_operations": False},
        _entries("groups"), data=lambda r, v: r["groups"][0]["group_state"] != "",
        setup=True),
    Row(42, "group DELETE", ((G, "DELETE"),), GROUP_DENIED,
        lambda n, v: {"groups_names": [n.group]}, _entries("results"),
        partial=((G, "READ"),), per_version=True, allowed_data=False),
    Row(47, "group DELETE", ((G, "DELETE"), (T, "READ")), GROUP_DENIED,
        lambda n, v: {"group_id": n.group, "topics": [
            {"name": n.topic, "partitions": [{"partition_index": 0}]}]},
        _top, partial=((G, "READ"), (T, "READ")), setup=True, allowed_data=False),
    Row(47, "topic READ", ((G, "DELETE"), (T, "READ")), TOPIC_DENIED,
        lambda n, v: {"group_id": n.group, "topics": [
            {"name": n.topic, "partitions": [{"partition_index": 0}]}]},
        _parts("topics", "partitions"), partial=((G, "DELETE"),), setup=True,
        allowed_data=False),
    Row(68, "group READ", ((G, "READ"), (T, "DESCRIBE")), GROUP_DENIED, _cgh, _top,
        partial=((G, "DESCRIBE"), (T, "DESCRIBE")), per_version=True, setup=True,
        allowed_data=False),
    Row(68, "topic DESCRIBE (subscribed names)", ((G, "READ"), (T, "DESCRIBE")), TOPIC_DENIED,
        _cgh, _top, partial=((G, "READ"),), per_version=True, setup=True, allowed_data=False),
    Row(69, "group DESCRIBE", ((G, "DESCRIBE"),), GROUP_DENIED,
        lambda n, v: {"group_ids": [n.group], "include_authorized_operations": False},
        _entries("groups"), allowed_data=False),
    # --- transactions and producer ids -------------------------------------------------
    Row(22, "transactional id WRITE", ((X, "WRITE"),), TXN_DENIED, _producer_id(True), _top,
        data=lambda r, v: r["producer_id"] >= 0, partial=((X, "DESCRIBE"),)),
    Row(22, "cluster IDEMPOTENT_WRITE", ((C, "IDEMPOTENT_WRITE"),), CLUSTER_DENIED,
        _producer_id(False), _top, data=lambda r, v: r["producer_id"] >= 0,
        denied_by="eve"),
    Row(22, "WRITE on any topic (KIP-679)", ((T, "WRITE"),), CLUSTER_DENIED,
        _producer_id(False), _top, data=lambda r, v: r["producer_id"] >= 0,
        denied_by="eve"),
    Row(24, "transactional id WRITE", ((X, "WRITE"), (T, "WRITE")), TXN_DENIED,
        _add_partitions, _parts("results_by_topic_v3_and_below", "results_by_partition",
                                "partition_error_code"),
        partial=((T, "WRITE"), (X, "DESCRIBE")), setup=True, allowed_data=False),
    Row(24, "topic WRITE", ((X, "WRITE"), (T, "WRITE")), TOPIC_DENIED,
        _add_partitions, _parts("results_by_topic_v3_and_below", "results_by_partition",
                                "partition_error_code"),
        partial=((X, "WRITE"), (T, "DESCRIBE")), setup=True, allowed_data=False),
    Row(25, "transactional id WRITE", ((X, "WRITE"), (G, "READ")), TXN_DENIED, _txn_call(),
        _top, partial=((G, "READ"),), allowed_data=False),
    Row(25, "group READ", ((X, "WRITE"), (G, "READ")), GROUP_DENIED, _txn_call(), _top,
        partial=((X, "WRITE"),), allowed_data=False),
    Row(26, "transactional id WRITE", ((X, "WRITE"),), TXN_DENIED,
        _txn_call(committed=False), _top, partial=((X, "DESCRIBE"),), allowed_data=False),
    Row(28, "transactional id WRITE", ((X, "WRITE"), (G, "READ"), (T, "READ")), TXN_DENIED,
        _txn_offset_commit, _parts("topics", "partitions"), partial=((G, "READ"), (T, "READ")),
        setup=True, allowed_data=False),
    Row(28, "group READ", ((X, "WRITE"), (G, "READ"), (T, "READ")), GROUP_DENIED,
        _txn_offset_commit, _parts("topics", "partitions"), partial=((X, "WRITE"), (T, "READ")),
        setup=True, allowed_data=False),
    Row(28, "topic READ", ((X, "WRITE"), (G, "READ"), (T, "READ")), TOPIC_DENIED,
        _txn_offset_commit, _parts("topics", "partitions"), partial=((X, "WRITE"), (G, "READ")),
        setup=True, allowed_data=False),
    Row(65, "transactional id DESCRIBE", ((X, "DESCRIBE"),), TXN_DENIED,
        lambda n, v: {"transactional_ids": [n.txn]}, _entries("transaction_states"),
        data=lambda r, v: r["transaction_states"][0]["producer_id"] >= 0, setup=True),
    Row(27, "cluster CLUSTER_ACTION", ((C, "CLUSTER_ACTION"),), CLUSTER_DENIED,
        lambda n, v: {"markers": [{"producer_id": 999_999, "producer_epoch": 0,
                                   "transaction_result": False, "coordinator_epoch": 0,
                                   "topics": [{"name": n.topic + "-none",
                                               "partition_indexes": [0]}]}]},
        lambda r, v: [p["error_code"] for m in r["markers"] for t in m["topics"]
                      for p in t["partitions"]], allowed_data=False),
    # --- the cluster -------------------------------------------------------------------
    Row(7, "cluster CLUSTER_ACTION", ((C, "CLUSTER_ACTION"),), CLUSTER_DENIED,
        lambda n, v: {"broker_id": 12345, "broker_epoch": -1}, _top, allowed_data=False),
    Row(29, "cluster DESCRIBE", ((C, "DESCRIBE"),), CLUSTER_DENIED, _acl_body, _top,
        data=lambda r, v: bool(r["resources"])),
    Row(30, "cluster ALTER", ((C, "ALTER"),), CLUSTER_DENIED, _acl_body, _entries("results"),
        allowed_data=False),
    Row(31, "cluster ALTER", ((C, "ALTER"),), CLUSTER_DENIED, _acl_body,
        _entries("filter_results"), allowed_data=False),
    Row(35, "cluster DESCRIBE", ((C, "DESCRIBE"),), CLUSTER_DENIED,
        lambda n, v: {"topics": None},
        lambda r, v: [r["error_code"]] if v >= 3 else [CLUSTER_DENIED] if not r["results"]
        else [0], data=lambda r, v: bool(r["results"])),
    Row(43, "cluster ALTER", ((C, "ALTER"),), CLUSTER_DENIED,
        lambda n, v: {"election_type": 0, "topic_partitions": [
            {"topic": n.topic, "partitions": [0]}], "timeout_ms": 5000},
        lambda r, v: ([r["error_code"]] if v >= 1 else []) + [
            p["error_code"] for t in r["replica_election_results"]
            for p in t["partition_result"]], setup=True, allowed_data=False),
    Row(45, "cluster ALTER", ((C, "ALTER"),), CLUSTER_DENIED,
        lambda n, v: {"timeout_ms": 5000, "topics": [
            {"name": n.topic, "partitions": [{"partition_index": 0, "replicas": None}]}]},
        _top, setup=True, allowed_data=False),
    Row(46, "cluster DESCRIBE", ((C, "DESCRIBE"),), CLUSTER_DENIED,
        lambda n, v: {"timeout_ms": 5000, "topics": None}, _top, allowed_data=False),
    Row(48, "cluster DESCRIBE_CONFIGS", ((C, "DESCRIBE_CONFIGS"),), CLUSTER_DENIED,
        lambda n, v: {"components": [], "strict": False}, _top, allowed_data=False),
    Row(49, "cluster ALTER_CONFIGS", ((C, "ALTER_CONFIGS"),), CLUSTER_DENIED,
        lambda n, v: {"entries": [{"entity": [{"entity_type": "client-id",
                                               "entity_name": "zz"}],
                                   "ops": [{"key": "producer_byte_rate", "value": 1024.0,
                                            "remove": False}]}], "validate_only": True},
        _entries("entries"), allowed_data=False),
    Row(50, "cluster DESCRIBE", ((C, "DESCRIBE"),), CLUSTER_DENIED,
        lambda n, v: {"users": None}, _top, allowed_data=False),
    Row(51, "cluster ALTER", ((C, "ALTER"),), CLUSTER_DENIED,
        lambda n, v: {"deletions": [{"name": "zz-nobody", "mechanism": 1}],
                      "upsertions": []}, _entries("results"), allowed_data=False),
]


@dataclasses.dataclass(frozen=True)
class Filtered:
    """A listing that leaves out what the principal may not describe (no error)."""

    api: int
    what: str
    grant: tuple[tuple[str, str], ...]
    body: Body
    listed: Callable[[dict[str, Any], Names], bool]
    setup: bool = True


FILTERED: list[Filtered] = [
    Filtered(3, "every topic: those it may DESCRIBE", ((T, "DESCRIBE"),),
             lambda n, v: {"topics": [] if v == 0 else None,
                           "allow_auto_topic_creation": False},
             lambda r, n: n.topic in {t["name"] for t in r["topics"]}),
    Filtered(16, "groups it may DESCRIBE (or cluster DESCRIBE)", ((G, "DESCRIBE"),),
             lambda n, v: {"states_filter": [], "types_filter": []},
             lambda r, n: n.group in {g["group_id"] for g in r["groups"]}),
    Filtered(66, "transactional ids it may DESCRIBE", ((X, "DESCRIBE"),),
             lambda n, v: {"state_filters": [], "producer_id_filters": [],
                           "duration_filter": -1},
             lambda r, n: n.txn in {t["transactional_id"] for t in r["transaction_states"]}),
]


def advertised() -> dict[int, tuple[int, int]]:
    return {a["api_key"]: (a["min_version"], a["max_version"])
            for a in api_versions_body()["api_keys"]}


def refused() -> list[tuple[int, int]]:
    """Versions listed in ApiVersions that the broker answers by closing the connection
    (Produce v0-2, as Kafka 4.0: listed for librdkafka's sake, KAFKA-18659)."""
    return [(key, v) for key, spec in HANDLERS.items()
            for v in range(advertised()[key][0], spec.min_version)]


def _versions(api: int, limit: tuple[int, int] | None) -> list[int]:
    low, high = advertised()[api]
    low = max(low, HANDLERS[api].min_version)
    if limit is not None:
        low, high = max(low, limit[0]), min(high, limit[1])
    return list(range(low, high + 1))


def _prefix(row: Row | Filtered) -> str:
    index = ROWS.index(row) if isinstance(row, Row) else 100 + FILTERED.index(row)
    return f"m{index:03d}-"


def _resource(row: Row | Filtered, version: int) -> str:
    per_version = isinstance(row, Row) and row.per_version
    return _prefix(row) + (f"v{version}" if per_version else "0")


CASES = [pytest.param(row, v, id=f"{row.api}-v{v}-{row.what.split(' (')[0].replace(' ', '_')}")
         for row in ROWS for v in _versions(row.api, row.versions)]
FILTERED_CASES = [pytest.param(f, v, id=f"{f.api}-v{v}") for f in FILTERED
                  for v in _versions(f.api, None)]


def test_every_advertised_version_has_a_row() -> None:
    covered = {(row.api, v) for row in ROWS for v in _versions(row.api, row.versions)}
    covered |= {(f.api, v) for f in FILTERED for v in _versions(f.api, None)}
    covered |= set(refused())
    missing = [(api, v) for api, (low, high) in advertised().items() for v in range(low, high + 1)
               if (api, v) not in covered and api not in NAMES_NO_RESOURCE]
    assert not missing, f"advertised without an authorization row: {missing}"
    assert not set(NAMES_NO_RESOURCE) & {row.api for row in ROWS}
    for row in ROWS:
        assert _versions(row.api, row.versions), f"row for no advertised version: {row}"


# --- the broker -------------------------------------------------------------------------
@dataclasses.dataclass
class Env:
    broker: Broker
    port: int
    broker_id: int
    topic_ids: dict[str, Any]
    clients: dict[str, ProtoClient]

    def client(self, user: str) -> ProtoClient:
        if user not in self.clients:
            pc = ProtoClient(f"127.0.0.1:{self.port}", client_id=f"matrix-{user}")
            pc.sasl_plain(user, f"{user}-pw")
            self.clients[user] = pc
        return self.clients[user]

    def request(self, user: str, api: int, version: int, body: dict[str, Any]
                ) -> dict[str, Any]:
        try:
            return self.client(user).request(api, version, body)
        except (ConnectionError, OSError):
            self.clients.pop(user, None)
            raise

    def names(self, row: Row | Filtered, version: int) -> Names:
        name = _resource(row, version)
        return Names(topic=name, group=name, txn=name, topic_id=self.topic_ids.get(name),
                     broker_id=self.broker_id)


def _conf(port: int, user: str) -> dict[str, object]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-pw"}


ACL_TYPES = {T: ResourceType.TOPIC, G: ResourceType.GROUP, X: ResourceType.TRANSACTIONAL_ID}


AUTO_CREATE = "mauto-"
#: bob may create these (a narrower prefix of AUTO_CREATE, which he may only describe)
AUTO_CREATE_BOB = f"{AUTO_CREATE}bobmay-"


def _bindings() -> list[AclBinding]:
    out: list[AclBinding] = []

    def allow(user: str, rtype: str, name: str, op: str, prefixed: bool) -> None:
        kind = ResourceType.BROKER if rtype == C else ACL_TYPES[rtype]
        pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
        binding = AclBinding(kind, "kafka-cluster" if rtype == C else name, pattern,
                             f"User:{user}", "*", getattr(AclOperation, op),
                             AclPermissionType.ALLOW)
        if binding not in out:
            out.append(binding)

    for row in [*ROWS, *FILTERED]:
        prefix = _prefix(row)
        allowed_by = row.allowed_by if isinstance(row, Row) else "alice"
        for rtype, op in row.grant:
            allow(allowed_by, rtype, prefix, op, prefixed=rtype != C)
        for rtype, op in getattr(row, "partial", ()):
            allow("bob", rtype, prefix, op, prefixed=True)
    for user, rtype, op in CLIENT_ACLS:
        allow(user, rtype, CLIENTS, op, prefixed=False)
    for topic in SESSION_TOPICS.values():
        allow("alice", T, topic, "READ", prefixed=False)
    allow("bob", T, AUTO_CREATE, "DESCRIBE", prefixed=True)
    allow("alice", T, AUTO_CREATE, "CREATE", prefixed=True)
    allow("alice", T, AUTO_CREATE, "DESCRIBE", prefixed=True)
    allow("bob", T, AUTO_CREATE_BOB, "CREATE", prefixed=True)
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    if external_bootstrap():
        pytest.skip("starts its own SASL broker")
    base: Path = tmp_path_factory.mktemp("authz")
    port, sasl_port = free_port(), free_port()
    broker = Broker(host="127.0.0.1", port=port, data_dir=base / "data",
                    log_path=base / "broker.log", overrides={
                        "listeners": f"PLAINTEXT://127.0.0.1:{port},"
                                     f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                        "listener.security.protocol.map":
                            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                        "sasl.enabled.mechanisms": "PLAIN",
                        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                        "authorizer.class.name":
                            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                        "super.users": "User:admin",
                        "allow.everyone.if.no.acl.found": "false",
                        "group.initial.rebalance.delay.ms": "0"})
    broker.start()
    try:
        yield _setup(broker, sasl_port)
    finally:
        broker.stop()


def _setup(broker: Broker, port: int) -> Env:
    admin = AdminClient(_conf(port, "admin"))
    for future in admin.create_acls(_bindings()).values():
        future.result(TIMEOUT_S)
    topics = []
    for row in [*ROWS, *FILTERED]:
        if row.setup:
            per_version = isinstance(row, Row) and row.per_version
            versions = _versions(row.api, getattr(row, "versions", None)) if per_version else [0]
            topics += [_resource(row, v) for v in versions]
    others = [CLIENTS, *SESSION_TOPICS.values()]
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in [*topics, *others]]).values():
        future.result(TIMEOUT_S)
    producer = Producer(_conf(port, "admin"))
    for t in topics:
        producer.produce(t, b"r")
    for t in others:
        producer.produce(t, CLIENT_RECORD)
    assert producer.flush(TIMEOUT_S) == 0
    env = Env(broker, port, 0, {}, {})
    meta = env.request("admin", 3, 12, {"topics": [{"name": t} for t in [*topics, *others]],
                                        "allow_auto_topic_creation": False})
    env.broker_id = meta["brokers"][0]["node_id"]
    env.topic_ids = {t["name"]: t["topic_id"] for t in meta["topics"]}
    # the rows' groups get a committed offset, their transactional ids a producer id
    # (FindCoordinator first: it creates the coordinators' internal topics)
    for name in topics:
        names = Names(name, name, name, None, 0)
        for key_type, api, body, codes in (
                (0, 8, _offset_commit(names, 8), _parts("topics", "partitions")),
                (1, 22, _producer_id(True)(names, 4), _top)):
            _until_ok(env, "admin", 10, 2, {"key": name, "key_type": key_type}, _top)
            _until_ok(env, "admin", api, 8 if api == 8 else 4, body, codes)
    return env


def _until_ok(env: Env, user: str, api: int, version: int, body: dict[str, Any],
              codes: Codes) -> None:
    """Send until every code is 0 (the coordinators load their internal topics first)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        reply = env.request(user, api, version, body)
        if all(c == 0 for c in codes(reply, version)):
            return
        assert time.monotonic() < deadline, reply
        time.sleep(0.2)


# --- the matrix -------------------------------------------------------------------------
@pytest.mark.parametrize(("row", "version"), CASES)
def test_authorization(env: Env, row: Row, version: int) -> None:
    names = env.names(row, version)
    body = row.body(names, version)
    denied = env.request(row.denied_by, row.api, version, body)
    codes = row.codes(denied, version)
    assert codes and all(c == row.code for c in codes), \
        f"{row.denied_by}: expected {row.code} for every part, got {codes}: {denied}"
    assert not row.data(denied, version), f"{row.denied_by} got the data: {denied}"
    if row.api == 20:  # a denied delete leaves the topic there
        assert names.topic in env.topic_ids and _exists(env, names.topic)

    allowed = env.request(row.allowed_by, row.api, version, row.body(names, version))
    codes = row.codes(allowed, version)
    assert not AUTH_CODES & set(codes), f"{row.allowed_by} was refused: {allowed}"
    if row.allowed_data:
        assert row.data(allowed, version), f"{row.allowed_by} got no data: {allowed}"


@pytest.mark.parametrize(("row", "version"), FILTERED_CASES)
def test_listing_leaves_out_what_may_not_be_described(env: Env, row: Filtered,
                                                      version: int) -> None:
    names = env.names(row, version)
    body = row.body(names, version)
    assert not row.listed(env.request("bob", row.api, version, body), names)
    assert row.listed(env.request("alice", row.api, version, body), names)


@pytest.mark.parametrize(("api", "version"), refused())
def test_refused_versions_close_the_connection(env: Env, api: int, version: int) -> None:
    """Before any authorization, and so for every principal."""
    with pytest.raises(ConnectionError):
        env.request("admin", api, version, _produce(False)(env.names(ROWS[0], 0), version))


def _exists(env: Env, topic: str) -> bool:
    reply = env.request("admin", 3, 12, {"topics": [{"name": topic}],
                                         "allow_auto_topic_creation": False})
    return bool(reply["topics"][0]["error_code"] == 0)


def test_unknown_topic_id_is_unknown_for_everyone(env: Env) -> None:
    """An id no topic has: UNKNOWN_TOPIC_ID and no records, with or without permissions
    (the authorizer cannot name it, so it never lets it through as allowed)."""
    fetch = next(r for r in ROWS if r.api == 1)
    known = env.names(fetch, 13)
    names = dataclasses.replace(known, topic_id=uuid.uuid4())
    for user in ("bob", "alice", "admin"):
        reply = env.request(user, 1, 13, fetch.body(names, 13))
        assert _parts("responses", "partitions")(reply, 13) == [UNKNOWN_TOPIC_ID], reply
        assert not _fetched(reply, 13)
    delete = next(r for r in ROWS if r.api == 20 and "id" in r.what)
    for user in ("bob", "alice"):
        reply = env.request(user, 20, 6, delete.body(names, 6))
        assert _entries("responses")(reply, 6) == [UNKNOWN_TOPIC_ID], reply


def test_broker_advertises_the_table_the_matrix_enumerates(env: Env) -> None:
    reply = env.request("eve", 18, 3, {"client_software_name": "matrix",
                                       "client_software_version": "1"})
    assert {a["api_key"]: (a["min_version"], a["max_version"])
            for a in reply["api_keys"]} == advertised()


# --- fetch sessions -------------------------------------------------------------------------
#: a topic alice may READ (until the test takes it away), per Fetch version
SESSION_TOPICS = {12: "ms-12", 13: "ms-13"}


@pytest.mark.parametrize("version", list(SESSION_TOPICS))
def test_fetch_session_partitions_are_authorized_on_every_fetch(env: Env, version: int) -> None:
    """An incremental fetch names no topics: the session's partitions are read. Each
    is authorized again for whoever fetches (as Kafka), so another principal using the
    session's id, or alice after her READ is taken away, reads nothing."""
    topic = SESSION_TOPICS[version]
    names = Names(topic, topic, topic, env.topic_ids[topic], env.broker_id)
    full = env.request("alice", 1, version, _fetch_body(False)(names, version)
                       | {"session_epoch": 0})
    assert full["error_code"] == 0 and full["session_id"] != 0 and _fetched(full, version)
    codes = _parts("responses", "partitions")

    def incremental(user: str, epoch: int) -> dict[str, Any]:
        return env.request(user, 1, version, {**_fetch_body(False)(names, version),
                                              "session_id": full["session_id"],
                                              "session_epoch": epoch, "topics": []})

    hijack = incremental("bob", 1)
    assert codes(hijack, version) == [TOPIC_DENIED] and not _fetched(hijack, version), hijack
    again = incremental("alice", 2)
    assert codes(again, version) == [0] and _fetched(again, version), again
    admin = AdminClient(_conf(env.port, "admin"))
    for future in admin.delete_acls([AclBindingFilter(
            ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", None,
            AclOperation.READ, AclPermissionType.ALLOW)]).values():
        assert len(future.result(TIMEOUT_S)) == 1
    revoked = incremental("alice", 3)
    assert codes(revoked, version) == [TOPIC_DENIED] and not _fetched(revoked, version), revoked
    # named again in the request too: one answer for the partition, not one per check
    named = env.request("alice", 1, version, {**_fetch_body(False)(names, version),
                                              "session_id": full["session_id"],
                                              "session_epoch": 4})
    assert codes(named, version) == [TOPIC_DENIED] and not _fetched(named, version), named


# --- real clients, the case --------------------------------------------------------
#: a topic bob may WRITE and DESCRIBE (and its group READ) but not READ; alice may READ
CLIENTS = "mc-0"
CLIENT_ACLS = (("alice", T, "READ"), ("alice", G, "READ"), ("bob", T, "WRITE"),
               ("bob", T, "DESCRIBE"), ("bob", G, "READ"))
CLIENT_RECORD = b"secret"


def _confluent_read(port: int, user: str) -> tuple[bytes | None, str | None]:
    """confluent-kafka 2.16 (librdkafka 2.x): assign() fetches with Fetch v13+, by id."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**_conf(port, user), "group.id": CLIENTS, "enable.auto.commit": False})
    consumer.assign([TopicPartition(CLIENTS, 0, 0)])
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                return None, msg.error().name()
            return msg.value(), None
        return None, "timed out"
    finally:
        consumer.close()


def _kcat_read(port: int, user: str) -> tuple[bytes | None, str | None]:
    """kcat 1.7 on Debian's librdkafka 2.0: Fetch v11, topics by name."""
    import subprocess

    run = subprocess.run(
        ["kcat", "-C", "-b", f"127.0.0.1:{port}", "-X", "security.protocol=SASL_PLAINTEXT",
         "-X", "sasl.mechanisms=PLAIN", "-X", f"sasl.username={user}",
         "-X", f"sasl.password={user}-pw", "-t", CLIENTS, "-p", "0", "-o", "beginning",
         "-c", "1", "-q"], capture_output=True, timeout=TIMEOUT_S + 30)
    if run.returncode == 0:
        return run.stdout.strip(), None
    return None, run.stderr.decode(errors="replace")


def _kafka_python_read(port: int, user: str) -> tuple[bytes | None, str | None]:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username=user, sasl_plain_password=f"{user}-pw",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(CLIENTS, 0)])
        consumer.seek(TopicPartition(CLIENTS, 0), 0)
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                batches = consumer.poll(timeout_ms=500)
            except KafkaError as exc:
                return None, type(exc).__name__
            for records in batches.values():
                return records[0].value, None
        return None, "timed out"
    finally:
        consumer.close()


def _aiokafka_read(port: int, user: str) -> tuple[bytes | None, str | None]:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import KafkaError

    async def read() -> tuple[bytes | None, str | None]:
        consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}",
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                    sasl_plain_username=user, sasl_plain_password=f"{user}-pw",
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(CLIENTS, 0)])
            consumer.seek(TopicPartition(CLIENTS, 0), 0)
            msg = await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
            return msg.value, None
        except KafkaError as exc:
            return None, type(exc).__name__
        finally:
            await consumer.stop()

    return asyncio.run(read())


READERS = {"confluent-kafka": _confluent_read, "kcat": _kcat_read,
           "kafka-python": _kafka_python_read, "aiokafka": _aiokafka_read}


@pytest.mark.parametrize("client", list(READERS))
def test_real_clients_read_only_with_read(env: Env, client: str) -> None:
    """The issue's case: WRITE and DESCRIBE on a topic do not let a consumer read it,
    whether its client names the topic by id (confluent-kafka) or by name (kcat)."""
    value, error = READERS[client](env.port, "bob")
    assert value is None, f"bob read {value!r} through {client}"
    assert error is not None and "authorization" in error.lower().replace("_", ""), error
    value, error = READERS[client](env.port, "alice")
    assert (value, error) == (CLIENT_RECORD, None)




@pytest.mark.parametrize("version", _versions(3, None))
def test_metadata_creates_topics_only_with_create(env: Env, version: int) -> None:
    """Metadata of an unknown topic creates it (auto.create.topics.enable; v0-3 always
    ask to) only for a principal with CREATE: bob may DESCRIBE the names, alice also
    CREATE them."""
    for user, created in (("bob", False), ("alice", True)):
        topic = f"{AUTO_CREATE}{user}-v{version}"
        reply = env.request(user, 3, version, {"topics": [{"name": topic}],
                                               "allow_auto_topic_creation": True})
        (answer,) = reply["topics"]
        if not created:
            assert answer["error_code"] == TOPIC_DENIED and not answer["partitions"], reply
        assert _exists(env, topic) == created, f"{user} v{version}: {reply}"


def test_metadata_creates_the_topics_it_may_and_refuses_the_others(env: Env) -> None:
    """CREATE is judged per topic (Kafka's unauthorizedForCreateTopics): of two unknown
    topics bob may describe, the one he may create is created and the other answers
    TOPIC_AUTHORIZATION_FAILED, in the same request."""
    may, may_not = f"{AUTO_CREATE_BOB}mixed", f"{AUTO_CREATE}bobnot-mixed"
    reply = env.request("bob", 3, 12, {"topics": [{"name": may}, {"name": may_not}],
                                       "allow_auto_topic_creation": True})
    answers = {t["name"]: t for t in reply["topics"]}
    assert answers[may_not]["error_code"] == TOPIC_DENIED, reply
    assert answers[may]["error_code"] in (0, 5), reply  # 5: created, no leader yet
    assert _exists(env, may) and not _exists(env, may_not), reply
