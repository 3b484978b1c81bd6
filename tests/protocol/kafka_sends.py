"""What Kafka's broker puts in every nullable or defaulted response field, per API.

A field that the schema lets be null, or that has a default, is where a broker can
answer without anyone noticing: the reference clients assume what Kafka's broker
sends there (the Java client 4.0 calls ``.stream()`` on DescribeTopicPartitions'
``eligible_leader_replicas``; pybroker sent null and broke kafka-topics.sh). So each
such field of each API pybroker advertises has an entry here saying what Kafka 4.0's
request handlers put there, read from them (KafkaApis, ControllerApis,
ReplicationControlManager, AclApis, the group coordinator, ReplicaManager and the
response classes), not only from the JSON schemas: a nullable string without
``"default": "null"`` defaults to "" in Kafka's generated classes, and a handler that
leaves it unset sends "".

* ``tests/protocol/test_kafka_sends_table.py`` fails when a nullable or defaulted
  response field of an advertised version has no entry (a new API or field must say
  what Kafka sends there) or when an entry names no such field.
* ``tests/integration/test_kafka_sends_live.py`` captures pybroker's answers to real
  requests (clients and raw requests through a recording proxy) and checks every such
  field of every answer against its entry.

An entry is a ``Rule``: what Kafka sends (prose, with where it is set) and a check of
one value in its context (the struct holding it, the request, the version).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

NO_OPS = -2147483648  # Kafka's "authorized operations not requested"
NONE = 0
UNKNOWN_TOPIC_ID = 100
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74


@dataclasses.dataclass(frozen=True)
class At:
    """Where a value was seen: the struct holding it, its answer and request."""

    value: Any
    parent: dict[str, Any]
    request: dict[str, Any]
    version: int
    #: broker.rack of the answering broker (None: unset)
    rack: str | None = None

    @property
    def ok(self) -> bool:
        """The struct's own error_code (or its answer's, if the struct has none) is 0."""
        return self.parent.get("error_code", NONE) == NONE


@dataclasses.dataclass(frozen=True)
class Rule:
    kafka: str
    check: Callable[[At], bool]


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def never_null(kafka: str) -> Rule:
    return Rule(kafka, lambda at: at.value is not None)


def always(value: Any, kafka: str) -> Rule:
    return Rule(kafka, lambda at: at.value == value)


def message_null_when_ok(kafka: str) -> Rule:
    """An error message set from ApiError.message(): null on success (ApiError.NONE),
    the error's message (or null) otherwise; never ""."""
    return Rule(kafka, lambda at: at.value is None if at.ok
                else at.value is None or (_is_str(at.value) and at.value != ""))


def message_empty_when_ok(kafka: str) -> Rule:
    """An error message a handler leaves unset on success: the generated default ""
    (the schema has no "default": "null"); on errors the message, "" where unset too."""
    return Rule(kafka, lambda at: at.value == "" if at.ok
                else at.value is None or _is_str(at.value))


def set_when_ok(default: Any, kafka: str, *, at_least: int = 0) -> Rule:
    """A number Kafka fills on success (>= at_least) and leaves at the default on errors."""
    return Rule(kafka, lambda at: at.value >= at_least if at.ok else at.value == default)


def leader_hint(errors: tuple[int, ...], since: int, kafka: str) -> Rule:
    """KIP-951: the current leader (or -1) with one of ``errors`` from version ``since``
    (KafkaApis.getCurrentLeader), -1 otherwise (tests/cluster/test_leader_hints.py)."""
    def check(at: At) -> bool:
        if at.version >= since and at.parent.get("error_code") in errors:
            return at.value >= -1
        return at.value == -1
    return Rule(kafka, check)


def rack(kafka: str) -> Rule:
    return Rule(kafka, lambda at: at.value == at.rack)


def operations(flag: str | None, kafka: str) -> Rule:
    """Authorized operations: NO_OPS unless the request's ``flag`` asks for them (then a
    bitfield); ``flag`` None: always filled for an answered resource."""
    def check(at: At) -> bool:
        asked = True if flag is None else bool(at.request.get(flag))
        if not asked:
            return at.value == NO_OPS
        return at.value >= 0 or (not at.ok and at.value == NO_OPS)
    return Rule(kafka, check)


def either(kafka: str, check: Callable[[At], bool] = lambda at: True) -> Rule:
    """Null or not, by state the answer cannot show (kafka says which state)."""
    return Rule(kafka, check)


def _member_instance_id(at: At) -> bool:
    """LeaveGroup v3+: each member answer echoes the request's member identity."""
    for m in at.request.get("members") or []:
        if m["member_id"] == at.parent.get("member_id"):
            return at.value == m["group_instance_id"]
    return True


def _fetch_aborted(at: At) -> bool:
    if at.request.get("isolation_level", 0) == 0 or not at.ok:
        return at.value is None
    return at.value is not None


def _list_offsets_timestamp(at: At) -> bool:
    if not at.ok:
        return at.value == -1
    asked = _requested_partition(at)
    if asked is not None and asked.get("timestamp") in (-1, -2):
        return at.value == -1
    return True


def _requested_partition(at: At) -> dict[str, Any] | None:
    for topic in at.request.get("topics") or []:
        for p in topic.get("partitions") or []:
            if p.get("partition_index") == at.parent.get("partition_index"):
                return p
    return None


def _epoch_with_offset(at: At) -> bool:
    """The epoch of the found offset: >= 0 when an offset was found, else -1."""
    if not at.ok or at.parent.get("offset", -1) < 0:
        return at.value == -1
    return at.value >= 0


def _same_pair(first: str, second: str) -> Callable[[At], bool]:
    def check(at: At) -> bool:
        return (at.parent[first] == -1) == (at.parent[second] == -1)
    return check


def _committed_epoch(at: At) -> bool:
    return at.value == -1 if at.parent.get("committed_offset", -1) < 0 else at.value >= -1


def _config_value(at: At) -> bool:
    return at.value is None if at.parent.get("is_sensitive") else True


def _features_epoch(at: At) -> bool:
    return at.value == -1 if not at.parent.get("finalized_features") else at.value >= 0


TABLE: dict[tuple[str, str], Rule] = {
    # --- Produce: KafkaApis.handleProduceRequest, ProduceResponse.PartitionResponse
    ("Produce", "responses.partition_responses.log_append_time_ms"): either(
        "-1 unless the topic's message.timestamp.type is LogAppendTime (then the append "
        "time); -1 on errors",
        lambda at: at.value == -1 or (at.ok and at.value > 0)),
    ("Produce", "responses.partition_responses.log_start_offset"): set_when_ok(
        -1, "the partition's log start offset; -1 (INVALID_OFFSET) on errors"),
    ("Produce", "responses.partition_responses.record_errors.batch_index_error_message"):
        either("the record's error message, null when the error has none"),
    ("Produce", "responses.partition_responses.error_message"): message_null_when_ok(
        "null on success (PartitionResponse.errorMessage unset); the error's message or "
        "null otherwise"),
    ("Produce", "responses.partition_responses.current_leader.leader_id"): leader_hint(
        (NOT_LEADER_OR_FOLLOWER,), 10, "KIP-951: with NOT_LEADER_OR_FOLLOWER the "
        "partition's current leader (-1 when unknown); -1 otherwise"),
    ("Produce", "responses.partition_responses.current_leader.leader_epoch"): leader_hint(
        (NOT_LEADER_OR_FOLLOWER,), 10, "as leader_id: that leader's epoch"),
    ("Produce", "node_endpoints.rack"): rack(
        "the listed broker's broker.rack, null when unset"),
    # --- Fetch: KafkaApis.handleFetchRequest, FetchResponse.partitionResponse
    ("Fetch", "responses.partitions.last_stable_offset"): set_when_ok(
        -1, "the partition's last stable offset; -1 on errors"),
    ("Fetch", "responses.partitions.log_start_offset"): set_when_ok(
        -1, "the partition's log start offset; -1 on errors"),
    ("Fetch", "responses.partitions.diverging_epoch.epoch"): either(
        "-1 unless the fetch's last_fetched_epoch diverges from the leader's log (then "
        "the epoch and its end offset, both set)", _same_pair("epoch", "end_offset")),
    ("Fetch", "responses.partitions.diverging_epoch.end_offset"): either(
        "as diverging_epoch.epoch", _same_pair("epoch", "end_offset")),
    ("Fetch", "responses.partitions.current_leader.leader_id"): leader_hint(
        (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH), 16, "KIP-951, v16+: with "
        "NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH the partition's current leader (-1 "
        "when unknown); -1 otherwise (also in v12-15)"),
    ("Fetch", "responses.partitions.current_leader.leader_epoch"): leader_hint(
        (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH), 16, "as leader_id: that leader's epoch"),
    ("Fetch", "responses.partitions.snapshot_id.end_offset"): always(
        -1, "-1: snapshots are KRaft's __cluster_metadata only"),
    ("Fetch", "responses.partitions.snapshot_id.epoch"): always(
        -1, "-1: snapshots are KRaft's __cluster_metadata only"),
    ("Fetch", "responses.partitions.aborted_transactions"): either(
        "null for read_uncommitted fetches and on errors (abortedTransactions.orElse(null)); "
        "a list, possibly empty, for read_committed", _fetch_aborted),
    ("Fetch", "responses.partitions.preferred_read_replica"): always(
        -1, "-1: no replica.selector.class (KIP-392 off by default)"),
    ("Fetch", "responses.partitions.records"): never_null(
        "the records read, MemoryRecords.EMPTY (not null) when none or on errors"),
    ("Fetch", "node_endpoints.rack"): rack("the listed broker's broker.rack, null when unset"),
    # --- ListOffsets: ReplicaManager.fetchOffset, UnifiedLog.fetchOffsetByTimestamp
    ("ListOffsets", "topics.partitions.timestamp"): either(
        "-1 for EARLIEST/LATEST and when nothing is found; the record's timestamp for a "
        "timestamp or MAX_TIMESTAMP lookup; -1 on errors", _list_offsets_timestamp),
    ("ListOffsets", "topics.partitions.offset"): either(
        "the offset found, -1 when none is (a timestamp past the last record); -1 on errors",
        lambda at: at.value >= -1 if at.ok else at.value == -1),
    ("ListOffsets", "topics.partitions.leader_epoch"): either(
        "the leader epoch of the offset found (>= 0), -1 when none is or on errors",
        _epoch_with_offset),
    # --- Metadata: KafkaApis.handleTopicMetadataRequest, KRaftMetadataCache
    ("Metadata", "brokers.rack"): rack("the broker's broker.rack, null when unset"),
    ("Metadata", "cluster_id"): never_null("the cluster id (a cluster always has one)"),
    ("Metadata", "controller_id"): either(
        "a live broker id (KRaft: a random alive broker), -1 only with none alive",
        lambda at: at.value >= 0),
    ("Metadata", "topics.name"): either(
        "the topic's name; null (v12+) for an unknown topic id (UNKNOWN_TOPIC_ID)",
        lambda at: at.value is None if at.parent["error_code"] == UNKNOWN_TOPIC_ID
        and at.version >= 12 else at.value is not None),
    ("Metadata", "topics.partitions.leader_epoch"): either(
        "the partition's leader epoch from its registration, also when its leader is "
        "not available", lambda at: at.value >= 0),
    ("Metadata", "topics.topic_authorized_operations"): operations(
        "include_topic_authorized_operations",
        "a bitfield when include_topic_authorized_operations, else INT32_MIN"),
    ("Metadata", "cluster_authorized_operations"): operations(
        "include_cluster_authorized_operations",
        "a bitfield when include_cluster_authorized_operations, else INT32_MIN"),
    # --- OffsetFetch: GroupCoordinatorService / OffsetMetadataManager.fetchOffsets
    ("OffsetFetch", "topics.partitions.committed_leader_epoch"): either(
        "the committed leader epoch, -1 when none was committed", _committed_epoch),
    ("OffsetFetch", "topics.partitions.metadata"): never_null(
        "the committed metadata; \"\" (OffsetFetchResponse.NO_METADATA) when nothing is "
        "committed, a null commit metadata is stored as \"\""),
    ("OffsetFetch", "groups.topics.partitions.committed_leader_epoch"): either(
        "the committed leader epoch, -1 when none was committed", _committed_epoch),
    ("OffsetFetch", "groups.topics.partitions.metadata"): never_null(
        "as topics.partitions.metadata: \"\" when nothing is committed"),
    # --- FindCoordinator v1-3: KafkaApis.handleFindCoordinatorRequestLessThanV4
    ("FindCoordinator", "error_message"): Rule(
        "Errors.message(): \"NONE\" on success (Errors.NONE has no exception, so its "
        "name); the error's default message otherwise",
        lambda at: at.value == "NONE" if at.ok else _is_str(at.value) and at.value != ""),
    # --- JoinGroup: GroupMetadataManager (classic group)
    ("JoinGroup", "generation_id"): set_when_ok(
        -1, "the group's generation; -1 (UNKNOWN_GENERATION_ID) on errors"),
    ("JoinGroup", "members.group_instance_id"): either(
        "the member's group.instance.id, null for a dynamic member"),
    # --- LeaveGroup v3+: GroupMetadataManager.classicGroupLeave
    ("LeaveGroup", "members.group_instance_id"): either(
        "the request's group_instance_id of that member (null for a dynamic member)",
        _member_instance_id),
    # --- DescribeGroups: ClassicGroup.asDescribedGroup
    ("DescribeGroups", "groups.members.group_instance_id"): either(
        "the member's group.instance.id, null for a dynamic member"),
    ("DescribeGroups", "groups.authorized_operations"): operations(
        "include_authorized_operations",
        "a bitfield when include_authorized_operations, else INT32_MIN"),
    # --- ApiVersions: ApiVersionsResponse.createApiVersionsResponse
    ("ApiVersions", "finalized_features_epoch"): either(
        "the epoch of the finalized features; -1 when the broker finalizes none",
        _features_epoch),
    # --- CreateTopics: ControllerApis.createTopics, ReplicationControlManager.createTopics
    ("CreateTopics", "topics.error_message"): message_null_when_ok(
        "null on success (setErrorMessage(null)); ApiError.message() on errors"),
    ("CreateTopics", "topics.num_partitions"): set_when_ok(
        -1, "the topic's partition count; -1 (unset) on errors", at_least=1),
    ("CreateTopics", "topics.replication_factor"): set_when_ok(
        -1, "the topic's replication factor; -1 (unset) on errors", at_least=1),
    ("CreateTopics", "topics.configs"): never_null(
        "the topic's effective configs; [] (the generated default, not null) on errors"),
    ("CreateTopics", "topics.configs.value"): Rule(
        "the config's value; null for a sensitive one and for one without a value",
        _config_value),
    ("CreateTopics", "topics.configs.config_source"): either(
        "the config's source (KafkaConfigSchema.translateConfigSource)",
        lambda at: at.value >= 0),
    # --- DeleteTopics: ControllerApis.deleteTopics
    ("DeleteTopics", "responses.name"): either(
        "the topic's name; null (v6+) for an unknown topic id (UNKNOWN_TOPIC_ID)",
        lambda at: at.value is None if at.parent["error_code"] == UNKNOWN_TOPIC_ID
        and at.version >= 6 else at.value is not None),
    ("DeleteTopics", "responses.error_message"): message_null_when_ok(
        "null on success; ApiError.message() on errors"),
    # --- InitProducerId: TransactionCoordinator / ProducerIdManager
    ("InitProducerId", "producer_id"): set_when_ok(
        -1, "the producer id; -1 (NO_PRODUCER_ID) on errors"),
    # --- OffsetForLeaderEpoch: Partition.lastOffsetForLeaderEpoch
    ("OffsetForLeaderEpoch", "topics.partitions.leader_epoch"): either(
        "the largest epoch <= the one asked for, -1 when there is none or on errors",
        lambda at: at.value >= -1 if at.ok else at.value == -1),
    ("OffsetForLeaderEpoch", "topics.partitions.end_offset"): either(
        "that epoch's end offset, -1 when there is none or on errors",
        lambda at: at.value >= -1 if at.ok else at.value == -1),
    # --- ACLs: AclApis, DescribeAclsResponse, DeleteAclsResponse
    ("DescribeAcls", "error_message"): message_empty_when_ok(
        "unset on success (\"\"); \"No Authorizer is configured on the broker\" with "
        "SECURITY_DISABLED"),
    ("DescribeAcls", "resources.pattern_type"): either(
        "the ACL's pattern type (LITERAL 3 or PREFIXED 4)", lambda at: at.value in (3, 4)),
    ("CreateAcls", "results.error_message"): message_empty_when_ok(
        "unset on success (\"\"); ApiError.message() on errors"),
    ("DeleteAcls", "filter_results.error_message"): message_null_when_ok(
        "ApiError.NONE.message() (null) on success"),
    ("DeleteAcls", "filter_results.matching_acls.error_message"): message_null_when_ok(
        "ApiError.NONE.message() (null) on success"),
    ("DeleteAcls", "filter_results.matching_acls.pattern_type"): either(
        "the deleted ACL's pattern type (LITERAL 3 or PREFIXED 4)",
        lambda at: at.value in (3, 4)),
    # --- configs: ConfigHelper.describeConfigs, ConfigAdminManager, ControllerApis
    ("DescribeConfigs", "results.error_message"): message_empty_when_ok(
        "unset on success (\"\"); the error's message otherwise"),
    ("DescribeConfigs", "results.configs.value"): Rule(
        "the config's value (ConfigDef.convertToString); null for a sensitive one and for "
        "one without a value (a null default such as log.retention.minutes)", _config_value),
    ("DescribeConfigs", "results.configs.config_source"): either(
        "the config's source (v1+)", lambda at: at.value >= 0),
    ("DescribeConfigs", "results.configs.synonyms.value"): either(
        "the synonym's value, null for a sensitive one",
        lambda at: at.value is not None or at.parent.get("value") is None),
    ("DescribeConfigs", "results.configs.documentation"): either(
        "the config's doc string when include_documentation, else null; null for a "
        "config without one",
        lambda at: at.value is None if not at.request.get("include_documentation")
        else True),
    ("AlterConfigs", "responses.error_message"): message_null_when_ok(
        "ApiError.message() (null for ApiError.NONE)"),
    ("IncrementalAlterConfigs", "responses.error_message"): message_null_when_ok(
        "ApiError.message() (null for ApiError.NONE)"),
    # --- DescribeLogDirs v4: ReplicaManager.describeLogDirs
    ("DescribeLogDirs", "results.total_bytes"): set_when_ok(
        -1, "the log dir's volume size; -1 for an offline dir"),
    ("DescribeLogDirs", "results.usable_bytes"): set_when_ok(
        -1, "the log dir's usable space; -1 for an offline dir"),
    # --- SASL: SaslServerAuthenticator
    ("SaslAuthenticate", "error_message"): message_empty_when_ok(
        "unset on success (\"\"); the authentication failure's message otherwise"),
    # --- partitions, leaders, reassignments: ControllerApis, ReplicationControlManager
    ("CreatePartitions", "results.error_message"): message_null_when_ok(
        "ApiError.message() (null for ApiError.NONE)"),
    ("ElectLeaders", "replica_election_results.partition_result.error_message"):
        message_null_when_ok("ApiError.message() (null for ApiError.NONE)"),
    ("AlterPartitionReassignments", "error_message"): message_null_when_ok(
        "setErrorMessage(null) on success; ApiError.message() otherwise"),
    ("AlterPartitionReassignments", "responses.partitions.error_message"):
        message_null_when_ok("ApiError.message() (null for ApiError.NONE)"),
    ("ListPartitionReassignments", "error_message"): message_null_when_ok(
        "setErrorMessage(null) on success; ApiError.message() otherwise"),
    # --- client quotas: DescribeClientQuotasResponse / AlterClientQuotasResponse
    ("DescribeClientQuotas", "error_message"): message_null_when_ok(
        "null on success (fromQuotaEntities); the error's message otherwise"),
    ("DescribeClientQuotas", "entries"): either(
        "the matching entries (a list, possibly empty) on success; null on errors",
        lambda at: (at.value is None) == (not at.ok)),
    ("DescribeClientQuotas", "entries.entity.entity_name"): either(
        "the entity's name, null for the default entity"),
    ("AlterClientQuotas", "entries.error_message"): message_null_when_ok(
        "ApiError.message() (null for ApiError.NONE)"),
    ("AlterClientQuotas", "entries.entity.entity_name"): either(
        "echoes the request's entity name, null for the default entity"),
    # --- SCRAM: KafkaApis / ControllerApis, ScramControlManager
    ("DescribeUserScramCredentials", "error_message"): message_empty_when_ok(
        "unset (\"\") by ScramImage.describe; the error's message on errors"),
    ("DescribeUserScramCredentials", "results.error_message"): message_empty_when_ok(
        "unset (\"\") on success (ScramImage.describe); RESOURCE_NOT_FOUND and "
        "DUPLICATE_RESOURCE with their messages"),
    ("AlterUserScramCredentials", "results.error_message"): message_null_when_ok(
        "ApiError.message() (null for ApiError.NONE)"),
    # --- DescribeCluster: KafkaApis.handleDescribeCluster
    ("DescribeCluster", "error_message"): message_null_when_ok(
        "unset on success (the schema's default null)"),
    ("DescribeCluster", "endpoint_type"): either(
        "echoes the request's endpoint_type (1: brokers)",
        lambda at: at.value == at.request.get("endpoint_type", 1)),
    ("DescribeCluster", "controller_id"): either(
        "a live broker id (KRaft: a random alive broker), -1 only with none alive",
        lambda at: at.value >= 0),
    ("DescribeCluster", "brokers.rack"): rack("the broker's broker.rack, null when unset"),
    ("DescribeCluster", "cluster_authorized_operations"): operations(
        "include_cluster_authorized_operations",
        "a bitfield when include_cluster_authorized_operations, else INT32_MIN"),
    # --- DescribeProducers: ReplicaManager.activeProducerState
    ("DescribeProducers", "topics.partitions.error_message"): message_null_when_ok(
        "null on success; the error's message (or null) otherwise"),
    ("DescribeProducers", "topics.partitions.active_producers.last_sequence"): either(
        "the producer's last sequence (>= 0 once it wrote)", lambda at: at.value >= 0),
    ("DescribeProducers", "topics.partitions.active_producers.last_timestamp"): either(
        "the producer's last batch's timestamp", lambda at: at.value >= 0),
    ("DescribeProducers", "topics.partitions.active_producers.current_txn_start_offset"):
        either("the first offset of its open transaction, -1 when none",
               lambda at: at.value >= -1),
    # --- KIP-848: GroupMetadataManager.consumerGroupHeartbeat / consumerGroupDescribe
    ("ConsumerGroupHeartbeat", "error_message"): message_null_when_ok(
        "null on success; the error's message otherwise"),
    ("ConsumerGroupHeartbeat", "member_id"): either(
        "the member's id on success, null on errors",
        lambda at: (at.value is not None) == at.ok),
    ("ConsumerGroupHeartbeat", "assignment"): either(
        "the member's assignment when it changed (or was asked for by a full request), "
        "else null", lambda at: at.value is None if not at.ok else True),
    ("ConsumerGroupDescribe", "groups.error_message"): message_null_when_ok(
        "null on success; the error's message otherwise"),
    ("ConsumerGroupDescribe", "groups.members.instance_id"): either(
        "the member's group.instance.id, null for a dynamic member"),
    ("ConsumerGroupDescribe", "groups.members.rack_id"): either(
        "the member's client.rack, null when unset"),
    ("ConsumerGroupDescribe", "groups.members.subscribed_topic_regex"): either(
        "the member's subscribed regex, null when it subscribes by names"),
    ("ConsumerGroupDescribe", "groups.authorized_operations"): operations(
        "include_authorized_operations",
        "a bitfield when include_authorized_operations, else INT32_MIN"),
    # --- DescribeTopicPartitions: DescribeTopicPartitionsRequestHandler, KRaftMetadataCache
    ("DescribeTopicPartitions", "topics.name"): never_null("the topic's name"),
    ("DescribeTopicPartitions", "topics.partitions.leader_epoch"): either(
        "the partition's leader epoch from its registration",
        lambda at: at.value >= 0),
    ("DescribeTopicPartitions", "topics.partitions.eligible_leader_replicas"): never_null(
        "Replicas.toList(partition.elr): [] without ELR, never null"),
    ("DescribeTopicPartitions", "topics.partitions.last_known_elr"): never_null(
        "Replicas.toList(partition.lastKnownElr): [] without ELR, never null"),
    ("DescribeTopicPartitions", "topics.topic_authorized_operations"): operations(
        None, "always the topic's authorized operations (there is no include flag); "
        "INT32_MIN only for a topic the client may not describe"),
    ("DescribeTopicPartitions", "next_cursor"): either(
        "the first partition left out, null when the answer holds the rest"),
}
