"""What each request needs the authorizer to allow, and Kafka's answer when it
does not (KafkaApis' checks): topics, groups, the cluster and transactional ids.

A check runs before the handler. It may answer the whole request itself (every
resource denied, or one the request cannot go without), or drop the denied
topics from the request and return a `merge` that puts their errors
(TOPIC_AUTHORIZATION_FAILED, ...) into the handler's response, so a request with
one denied topic still succeeds for the others, as in Kafka. Metadata and the
"every group / every offset" forms leave out what the principal may not describe.

Fail closed: a topic id that names no topic is answered here (UNKNOWN_TOPIC_ID, as
Kafka) and never reaches the handler, which might resolve it a moment later; an API
with no check here and not in NO_RESOURCE is refused (the connection closes)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

from pybroker.errors import ErrorCode
from pybroker.security.acls import CLUSTER_NAME, Operation, ResourceType
from pybroker.protocol.types import ZERO_UUID
from pybroker.security.authorizer import Authorizer
from pybroker.security.session import ANONYMOUS

Body = dict[str, Any]

TOPIC, GROUP, CLUSTER, TXN = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                              ResourceType.TRANSACTIONAL_ID)
Op = Operation
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
#: marks a topic of a Metadata request that the principal may not create: when it does
#: not exist and would be auto-created, the handler answers TOPIC_AUTHORIZATION_FAILED
CREATE_DENIED = "create_denied"
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TXN_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
UNKNOWN_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)
NOT_ATTEMPTED = int(ErrorCode.OPERATION_NOT_ATTEMPTED)
NO_OPERATIONS = -2147483648

#: APIs that name nothing an ACL guards (Kafka authorizes none of them): the SASL
#: exchange and ApiVersions come before authentication, DescribeCluster tells no secret
NO_RESOURCE = frozenset({17, 18, 36, 60})


@dataclasses.dataclass(frozen=True)
class Allowed:
    """What a check asks: may the principal do `op` on a resource (called), may it do
    `op` on some resource of a type (`any`), and which topic a request's topic id names
    (`topic_name`: MetadataCache.topic_name, the resolver the handlers use too)."""

    authorizer: Authorizer
    principal: str
    host: str
    topic_name: Callable[[uuid.UUID], str | None]

    def __call__(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rtype, name)

    def any(self, op: Operation, rtype: ResourceType) -> bool:
        return self.authorizer.authorize_any(self.principal, self.host, op, rtype)


@dataclasses.dataclass
class Decision:
    #: answer this instead of running the handler
    response: Body | None = None
    #: called with the handler's response to add the denied parts
    merge: Callable[[Body], None] | None = None
    #: close the connection (acks=0 produce with a denied topic, as Kafka)
    close: bool = False
    #: something was denied (counted in the metrics)
    denied: bool = False


def _split(items: list[Any], name: Callable[[Any], str], ok: Callable[[str], bool]
           ) -> tuple[list[Any], list[Any]]:
    keep, drop = [], []
    for item in items:
        (keep if ok(name(item)) else drop).append(item)
    return keep, drop


def _merge_into(key: str, extra: list[Body]) -> Callable[[Body], None]:
    def merge(response: Body) -> None:
        response.setdefault(key, [])
        response[key] = list(response[key]) + extra
    return merge


def _topic_level(body: Body, req_key: str, resp_key: str, name_key: str, ok: Callable[[str], bool],
                 denied_entry: Callable[[Any], Body], whole: Body) -> Decision | None:
    """Drop denied entries of body[req_key]; their denied_entry()s join resp_key."""
    keep, drop = _split(body[req_key] or [], lambda t: t[name_key] if isinstance(t, dict)
                        else t, ok)
    if not drop:
        return None
    extra = [denied_entry(t) for t in drop]
    if not keep:
        return Decision(response={**whole, resp_key: extra}, denied=True)
    body[req_key] = keep
    return Decision(merge=_merge_into(resp_key, extra), denied=True)


def _partitions(t: Body, key: str, code: int, **fields: Any) -> list[Body]:
    return [{"partition_index": p["partition_index"] if isinstance(p, dict) else p,
             "error_code": code, **fields} for p in t[key]]


def check(authorizer: Authorizer, principal: str, host: str, api_key: int, version: int,
          body: Body, topic_name: Callable[[uuid.UUID], str | None]) -> Decision | None:
    fn = CHECKS.get(api_key)
    if fn is None:
        if api_key in NO_RESOURCE:
            return None
        # an API nobody said how to authorize is refused, not let through
        return Decision(close=True, denied=True)
    return fn(Allowed(authorizer, principal, host, topic_name), version, body)


# --- per API ------------------------------------------------------------------------------
def _produce(allowed: Allowed, version: int, body: Body) -> Decision | None:
    txn = body["transactional_id"] if version >= 3 else None  # (from v3; checked when set)
    code = TXN_DENIED if txn is not None and not allowed(Op.WRITE, TXN, txn) else TOPIC_DENIED
    ok = (lambda n: False) if code == TXN_DENIED else (lambda n: allowed(Op.WRITE, TOPIC, n))

    def entry(t: Body) -> Body:
        return {"name": t["name"], "partition_responses": [
            {"index": p["index"], "error_code": code, "base_offset": -1,
             "log_append_time_ms": -1, "log_start_offset": -1}
            for p in t["partition_data"]]}

    decision = _topic_level(body, "topic_data", "responses", "name", ok, entry,
                            {"throttle_time_ms": 0})
    if decision is not None and body["acks"] == 0:
        return Decision(close=True, denied=True)
    return decision


def _fetch_error(t: Body, code: int) -> Body:
    return {"topic": t["topic"], "topic_id": t["topic_id"], "partitions": [
        {"partition_index": p["partition"], "error_code": code, "high_watermark": -1,
         "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
         "preferred_read_replica": -1, "records": b""} for p in t["partitions"]]}


def _fetch(allowed: Allowed, version: int, body: Body) -> Decision | None:
    """A consumer needs READ on each topic, a follower CLUSTER_ACTION (without it each of
    its partitions is TOPIC_AUTHORIZATION_FAILED, as Kafka). v13+ names topics by id: an
    id that names no topic is UNKNOWN_TOPIC_ID, answered here, never passed on."""
    replica = body["replica_state"]["replica_id"] if version >= 15 else body["replica_id"]
    follower_ok = replica >= 0 and allowed(Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    keep, extra, denied = [], [], False
    for t in body["topics"] or []:
        name = allowed.topic_name(t["topic_id"]) if version >= 13 else t["topic"]
        if name is None:
            extra.append(_fetch_error(t, UNKNOWN_ID))
        elif follower_ok or (replica < 0 and allowed(Op.READ, TOPIC, name)):
            keep.append(t)
        else:
            extra.append(_fetch_error(t, TOPIC_DENIED))
            denied = True
    if not extra:
        return None
    # the handler still runs (with what is left, maybe nothing): a fetch session moves on
    body["topics"] = keep
    key = "topic_id" if version >= 13 else "topic"
    answered = {t[key] for t in extra}

    def merge(response: Body) -> None:
        # a session's partition of a topic answered here is not answered twice
        response["responses"] = [t for t in response["responses"]
                                 if t[key] not in answered] + extra
    return Decision(merge=merge, denied=denied)


def _list_offsets(allowed: Allowed, version: int, body: Body) -> Decision | None:
    return _topic_level(body, "topics", "topics", "name",
                        lambda n: allowed(Op.DESCRIBE, TOPIC, n),
                        lambda t: {"name": t["name"], "partitions": _partitions(
                            t, "partitions", TOPIC_DENIED, timestamp=-1, offset=-1)},
                        {"throttle_time_ms": 0})


def _metadata_error(name: str | None, topic_id: uuid.UUID, code: int) -> Body:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "topic_authorized_operations": NO_OPERATIONS}


def _metadata(allowed: Allowed, version: int, body: Body) -> Decision | None:
    def describable(response: Body) -> None:
        response["topics"] = [t for t in response["topics"]
                              if allowed(Op.DESCRIBE, TOPIC, t["name"])]

    requested = body["topics"]
    if requested is None or (version == 0 and not requested):
        return Decision(merge=describable)
    keep, extra = [], []
    for t in requested:
        if t["name"] is not None:
            if allowed(Op.DESCRIBE, TOPIC, t["name"]):
                keep.append(t)
            else:
                extra.append(_metadata_error(t["name"], ZERO_UUID, TOPIC_DENIED))
            continue
        # by id (KIP-516): unknown is UNKNOWN_TOPIC_ID; a known id the principal may not
        # describe is TOPIC_AUTHORIZATION_FAILED without its name (as Kafka)
        name = allowed.topic_name(t["topic_id"])
        if name is None:
            extra.append(_metadata_error(None, t["topic_id"], UNKNOWN_ID))
        elif allowed(Op.DESCRIBE, TOPIC, name):
            keep.append(t)
        else:
            extra.append(_metadata_error(None, t["topic_id"], TOPIC_DENIED))
    # every version may create topics (v0-3 always ask to): only with CREATE, judged per
    # topic (Kafka's unauthorizedForCreateTopics): the handler creates the others
    if body["allow_auto_topic_creation"] and not allowed(Op.CREATE, CLUSTER, CLUSTER_NAME):
        for t in keep:
            if t["name"] is not None and not allowed(Op.CREATE, TOPIC, t["name"]):
                t[CREATE_DENIED] = True
    if not extra:
        return None
    body["topics"] = keep
    denied = any(e["error_code"] == TOPIC_DENIED for e in extra)
    if keep:
        return Decision(merge=_merge_into("topics", extra), denied=denied)
    # v1+: [] is "no topics" (the brokers still come back); v0's "every topic" is replaced
    return Decision(merge=lambda response: response.update(topics=extra), denied=denied)


def _describable_topics_only(allowed: Allowed) -> Decision:
    """For the "every topic" forms: the answer keeps the topics the principal may describe."""
    def describable(response: Body) -> None:
        response["topics"] = [t for t in response["topics"]
                              if allowed(Op.DESCRIBE, TOPIC, t["name"])]
    return Decision(merge=describable)


def _describe_topic_partitions(allowed: Allowed, version: int, body: Body
                               ) -> Decision | None:
    if not body["topics"]:  # every topic: those it may describe
        return _describable_topics_only(allowed)
    return _topic_level(body, "topics", "topics", "name",
                        lambda n: allowed(Op.DESCRIBE, TOPIC, n),
                        lambda t: _metadata_error(t["name"], ZERO_UUID, TOPIC_DENIED),
                        {"throttle_time_ms": 0, "next_cursor": None})


def _offset_for_leader_epoch(allowed: Allowed, version: int, body: Body) -> Decision | None:
    # brokers ask with CLUSTER_ACTION, consumers (KIP-320) with DESCRIBE on the topic
    if allowed(Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return None
    return _topic_level(body, "topics", "topics", "topic",
                        lambda n: allowed(Op.DESCRIBE, TOPIC, n),
                        lambda t: {"topic": t["topic"], "partitions": [
                            {"partition": p["partition"], "error_code": TOPIC_DENIED,
                             "leader_epoch": -1, "end_offset": -1} for p in t["partitions"]]},
                        {"throttle_time_ms": 0})


def _group_whole(op: Operation, response: Body) -> Callable[[Allowed, int, Body],
                                                             Decision | None]:
    def fn(allowed: Allowed, version: int, body: Body) -> Decision | None:
        if allowed(op, GROUP, body["group_id"]):
            return None
        return Decision(response={**response, "error_code": GROUP_DENIED}, denied=True)
    return fn


def _offset_commit(allowed: Allowed, version: int, body: Body) -> Decision | None:
    code = None if allowed(Op.READ, GROUP, body["group_id"]) else GROUP_DENIED

    def entry(t: Body) -> Body:
        return {"name": t["name"], "partitions": _partitions(t, "partitions",
                                                              code or TOPIC_DENIED)}

    ok = (lambda n: False) if code else (lambda n: allowed(Op.READ, TOPIC, n))
    return _topic_level(body, "topics", "topics", "name", ok, entry, {"throttle_time_ms": 0})


def _offset_fetch_groups(allowed: Allowed, body: Body) -> Decision | None:
    """v8+: several groups, each with its own error."""
    keep = [g for g in body["groups"] if allowed(Op.DESCRIBE, GROUP, g["group_id"])]
    drop = [{"group_id": g["group_id"], "topics": [], "error_code": GROUP_DENIED}
            for g in body["groups"] if not allowed(Op.DESCRIBE, GROUP, g["group_id"])]
    denied_topics: dict[str, list[Body]] = {}
    for group in keep:
        if group["topics"] is None:
            continue
        ok, bad = _split(group["topics"], lambda t: t["name"],
                         lambda n: allowed(Op.DESCRIBE, TOPIC, n))
        if bad:
            group["topics"] = ok
            denied_topics[group["group_id"]] = [
                {"name": t["name"], "partitions": [
                    {"partition_index": p, "committed_offset": -1, "error_code": TOPIC_DENIED}
                    for p in t["partition_indexes"]]} for t in bad]

    def merge(response: Body) -> None:
        for group in response["groups"]:
            group["topics"] = [t for t in group["topics"]
                               if allowed(Op.DESCRIBE, TOPIC, t["name"])]
            group["topics"] += denied_topics.get(group["group_id"], [])
        response["groups"] = list(response["groups"]) + drop

    if not keep:
        return Decision(response={"throttle_time_ms": 0, "groups": drop}, denied=True)
    body["groups"] = keep
    return Decision(merge=merge, denied=bool(drop or denied_topics))


def _offset_fetch(allowed: Allowed, version: int, body: Body) -> Decision | None:
    if version >= 8:
        return _offset_fetch_groups(allowed, body)
    if not allowed(Op.DESCRIBE, GROUP, body["group_id"]):
        return Decision(response={"throttle_time_ms": 0, "error_code": GROUP_DENIED,
                                  "topics": [] if version >= 2 else [
                                      {"name": t["name"], "partitions": [
                                          {"partition_index": p, "committed_offset": -1,
                                           "error_code": GROUP_DENIED}
                                          for p in t["partition_indexes"]]}
                                      for t in body["topics"] or []]}, denied=True)
    if body["topics"] is None:
        return _describable_topics_only(allowed)
    return _topic_level(body, "topics", "topics", "name",
                        lambda n: allowed(Op.DESCRIBE, TOPIC, n),
                        lambda t: {"name": t["name"], "partitions": [
                            {"partition_index": p, "committed_offset": -1,
                             "error_code": TOPIC_DENIED} for p in t["partition_indexes"]]},
                        {"throttle_time_ms": 0, "error_code": 0})


def _find_coordinator(allowed: Allowed, version: int, body: Body) -> Decision | None:
    txn = body["key_type"] == 1
    key = body["key"]
    if allowed(Op.DESCRIBE, TXN if txn else GROUP, key):
        return None
    code = TXN_DENIED if txn else GROUP_DENIED
    return Decision(response={"throttle_time_ms": 0, "error_code": code,
                              "error_message": ErrorCode(code).name, "node_id": -1,
                              "host": "", "port": -1}, denied=True)


def _describe_groups(allowed: Allowed, version: int, body: Body) -> Decision | None:
    return _topic_level(body, "groups", "groups", "", lambda g: allowed(Op.DESCRIBE, GROUP, g),
                        lambda g: {"error_code": GROUP_DENIED, "group_id": g,
                                   "group_state": "", "protocol_type": "",
                                   "protocol_data": "", "members": [],
                                   "authorized_operations": -2147483648},
                        {"throttle_time_ms": 0})


def _list_groups(allowed: Allowed, version: int, body: Body) -> Decision | None:
    if allowed(Op.DESCRIBE, CLUSTER, CLUSTER_NAME):
        return None

    def describable(response: Body) -> None:
        response["groups"] = [g for g in response["groups"]
                              if allowed(Op.DESCRIBE, GROUP, g["group_id"])]
    return Decision(merge=describable)


def _delete_groups(allowed: Allowed, version: int, body: Body) -> Decision | None:
    return _topic_level(body, "groups_names", "results", "",
                        lambda g: allowed(Op.DELETE, GROUP, g),
                        lambda g: {"group_id": g, "error_code": GROUP_DENIED},
                        {"throttle_time_ms": 0})


def _offset_delete(allowed: Allowed, version: int, body: Body) -> Decision | None:
    if not allowed(Op.DELETE, GROUP, body["group_id"]):
        return Decision(response={"error_code": GROUP_DENIED, "throttle_time_ms": 0,
                                  "topics": []}, denied=True)
    return _topic_level(body, "topics", "topics", "name", lambda n: allowed(Op.READ, TOPIC, n),
                        lambda t: {"name": t["name"], "partitions": _partitions(
                            t, "partitions", TOPIC_DENIED)},
                        {"error_code": 0, "throttle_time_ms": 0})


def _create_topics(allowed: Allowed, version: int, body: Body) -> Decision | None:
    if allowed(Op.CREATE, CLUSTER, CLUSTER_NAME):
        return None
    return _topic_level(body, "topics", "topics", "name", lambda n: allowed(Op.CREATE, TOPIC, n),
                        lambda t: {"name": t["name"], "error_code": TOPIC_DENIED,
                                   "error_message": "Authorization failed.",
                                   "num_partitions": -1, "replication_factor": -1},
                        {"throttle_time_ms": 0})


def _delete_topics(allowed: Allowed, version: int, body: Body) -> Decision | None:
    if version < 6:
        return _topic_level(body, "topic_names", "responses", "",
                            lambda n: allowed(Op.DELETE, TOPIC, n),
                            lambda n: {"name": n, "error_code": TOPIC_DENIED},
                            {"throttle_time_ms": 0})
    keep, extra, denied = [], [], False
    for t in body["topics"] or []:
        name = t["name"] if t["name"] is not None else allowed.topic_name(t["topic_id"])
        if name is None:
            extra.append({"name": None, "topic_id": t["topic_id"], "error_code": UNKNOWN_ID,
                          "error_message": "Topic id not found."})
        elif allowed(Op.DELETE, TOPIC, name):
            keep.append(t)
        else:
            # by id, the name is told only to who may describe the topic (as Kafka)
            told = name if t["name"] is not None or allowed(Op.DESCRIBE, TOPIC, name) else None
            extra.append({"name": told, "topic_id": t["topic_id"], "error_code": TOPIC_DENIED})
            denied = True
    if not extra:
        return None
    if not keep:
        return Decision(response={"throttle_time_ms": 0, "responses": extra}, denied=denied)
    body["topics"] = keep
    return Decision(merge=_merge_into("responses", extra), denied=denied)


def _create_partitions(allowed: Allowed, version: int, body: Body) -> Decision | None:
    return _topic_level(body, "topics", "results", "name", lambda n: allowed(Op.ALTER, TOPIC, n),
                        lambda t: {"name": t["name"], "error_code": TOPIC_DENIED,
                                   "error_message": "Authorization failed."},
                        {"throttle_time_ms": 0})


def _delete_records(allowed: Allowed, version: int, body: Body) -> Decision | None:
    return _topic_level(body, "topics", "topics", "name", lambda n: allowed(Op.DELETE, TOPIC, n),
                        lambda t: {"name": t["name"], "partitions": _partitions(
                            t, "partitions", TOPIC_DENIED, low_watermark=-1)},
                        {"throttle_time_ms": 0})


def _configs(op: Operation, resp_key: str) -> Callable[[Allowed, int, Body], Decision | None]:
    def fn(allowed: Allowed, version: int, body: Body) -> Decision | None:
        def ok(r: Body) -> bool:
            if r["resource_type"] == 2:
                return allowed(op, TOPIC, r["resource_name"])
            if r["resource_type"] == 32:  # a group's configs: the group's ACLs, as Kafka
                return allowed(op, GROUP, r["resource_name"])
            return allowed(op, CLUSTER, CLUSTER_NAME)

        def denied(kind: int) -> int:
            return {2: TOPIC_DENIED, 32: GROUP_DENIED}.get(kind, CLUSTER_DENIED)

        keep, drop = [r for r in body["resources"] if ok(r)], [
            r for r in body["resources"] if not ok(r)]
        if not drop:
            return None
        extra = [{"error_code": denied(r["resource_type"]),
                  "error_message": "Authorization failed.", "resource_type": r["resource_type"],
                  "resource_name": r["resource_name"], "configs": []} for r in drop]
        if not keep:
            return Decision(response={"throttle_time_ms": 0, resp_key: extra}, denied=True)
        body["resources"] = keep
        return Decision(merge=_merge_into(resp_key, extra), denied=True)
    return fn


def _init_producer_id(allowed: Allowed, version: int, body: Body) -> Decision | None:
    txn = body["transactional_id"]
    if txn is not None:
        ok, code = allowed(Op.WRITE, TXN, txn), TXN_DENIED
    else:
        # KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic
        ok = allowed(Op.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME) or allowed.any(Op.WRITE, TOPIC)
        code = CLUSTER_DENIED
    if ok:
        return None
    return Decision(response={"throttle_time_ms": 0, "error_code": code, "producer_id": -1,
                              "producer_epoch": -1}, denied=True)


def _txn_whole(field: str, response: Callable[[Body], Body]) -> Callable[
        [Allowed, int, Body], Decision | None]:
    def fn(allowed: Allowed, version: int, body: Body) -> Decision | None:
        if allowed(Op.WRITE, TXN, body[field]):
            return None
        return Decision(response=response(body), denied=True)
    return fn


def _add_partitions_to_txn(allowed: Allowed, version: int, body: Body) -> Decision | None:
    """WRITE on the transactional id, then on each topic: one topic denied fails the
    whole request, the others OPERATION_NOT_ATTEMPTED (as Kafka)."""
    topics = body["v3_and_below_topics"] or []

    def answer(code_of: Callable[[str], int]) -> Decision:
        return Decision(response={"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": t["name"], "results_by_partition": [
                {"partition_index": p, "partition_error_code": code_of(t["name"])}
                for p in t["partitions"]]} for t in topics]}, denied=True)

    if not allowed(Op.WRITE, TXN, body["v3_and_below_transactional_id"]):
        return answer(lambda name: TXN_DENIED)
    denied = {t["name"] for t in topics if not allowed(Op.WRITE, TOPIC, t["name"])}
    if not denied:
        return None
    return answer(lambda name: TOPIC_DENIED if name in denied else NOT_ATTEMPTED)


def _add_offsets_to_txn(allowed: Allowed, version: int, body: Body) -> Decision | None:
    if not allowed(Op.WRITE, TXN, body["transactional_id"]):
        code = TXN_DENIED
    elif not allowed(Op.READ, GROUP, body["group_id"]):
        code = GROUP_DENIED
    else:
        return None
    return Decision(response={"throttle_time_ms": 0, "error_code": code}, denied=True)


def _txn_offset_commit(allowed: Allowed, version: int, body: Body) -> Decision | None:
    """WRITE on the transactional id and READ on the group, or every partition fails
    with that error; then READ on each topic, the denied ones failing alone."""
    if not allowed(Op.WRITE, TXN, body["transactional_id"]):
        code = TXN_DENIED
    elif not allowed(Op.READ, GROUP, body["group_id"]):
        code = GROUP_DENIED
    else:
        return _topic_level(body, "topics", "topics", "name",
                            lambda n: allowed(Op.READ, TOPIC, n),
                            lambda t: {"name": t["name"], "partitions": _partitions(
                                t, "partitions", TOPIC_DENIED)},
                            {"throttle_time_ms": 0})
    return Decision(response={"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": _partitions(t, "partitions", code)}
        for t in body["topics"]]}, denied=True)


def _cluster(op: Operation, response: Callable[[Body], Body]) -> Callable[
        [Allowed, int, Body], Decision | None]:
    def fn(allowed: Allowed, version: int, body: Body) -> Decision | None:
        if allowed(op, CLUSTER, CLUSTER_NAME):
            return None
        return Decision(response=response(body), denied=True)
    return fn


def _consumer_group_heartbeat(allowed: Allowed, version: int, body: Body) -> Decision | None:
    """READ on the group, then DESCRIBE on every topic subscribed to by name (Kafka 4)."""
    if not allowed(Op.READ, GROUP, body["group_id"]):
        code = GROUP_DENIED
    elif not all(allowed(Op.DESCRIBE, TOPIC, t) for t in body["subscribed_topic_names"] or []):
        code = TOPIC_DENIED
    else:
        return None
    return Decision(response={"throttle_time_ms": 0, "error_code": code,
                              "error_message": "Authorization failed.", "member_id": None,
                              "member_epoch": -1, "heartbeat_interval_ms": 0,
                              "assignment": None}, denied=True)


def _consumer_group_describe(allowed: Allowed, version: int, body: Body) -> Decision | None:
    return _topic_level(body, "group_ids", "groups", "",
                        lambda g: allowed(Op.DESCRIBE, GROUP, g),
                        lambda g: {"error_code": GROUP_DENIED, "error_message": None,
                                   "group_id": g, "group_state": "", "group_epoch": -1,
                                   "assignment_epoch": -1, "assignor_name": "", "members": [],
                                   "authorized_operations": -2147483648},
                        {"throttle_time_ms": 0})


def _describe_producers(allowed: Allowed, version: int, body: Body) -> Decision | None:
    return _topic_level(body, "topics", "topics", "name", lambda n: allowed(Op.READ, TOPIC, n),
                        lambda t: {"name": t["name"], "partitions": [
                            {"partition_index": p, "error_code": TOPIC_DENIED,
                             "error_message": None, "active_producers": []}
                            for p in t["partition_indexes"]]},
                        {"throttle_time_ms": 0})


def _describe_transactions(allowed: Allowed, version: int, body: Body) -> Decision | None:
    return _topic_level(body, "transactional_ids", "transaction_states", "",
                        lambda t: allowed(Op.DESCRIBE, TXN, t),
                        lambda t: {"error_code": TXN_DENIED, "transactional_id": t,
                                   "transaction_state": "", "transaction_timeout_ms": 0,
                                   "transaction_start_time_ms": -1, "producer_id": -1,
                                   "producer_epoch": -1, "topics": []},
                        {"throttle_time_ms": 0})


def _list_transactions(allowed: Allowed, version: int, body: Body) -> Decision | None:
    def describable(response: Body) -> None:
        response["transaction_states"] = [
            t for t in response["transaction_states"]
            if allowed(Op.DESCRIBE, TXN, t["transactional_id"])]
    return Decision(merge=describable)


CHECKS: dict[int, Callable[[Allowed, int, Body], Decision | None]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    # Kafka: only brokers (CLUSTER_ACTION) may ask the controller to move leaderships
    7: _cluster(Op.CLUSTER_ACTION, lambda b: {"error_code": CLUSTER_DENIED,
                                              "remaining_partitions": []}),
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group_whole(Op.READ, {"throttle_time_ms": 0, "generation_id": -1, "members": []}),
    12: _group_whole(Op.READ, {"throttle_time_ms": 0}),
    13: _group_whole(Op.READ, {"throttle_time_ms": 0, "members": []}),
    14: _group_whole(Op.READ, {"throttle_time_ms": 0, "assignment": b""}),
    15: _describe_groups,
    16: _list_groups,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _txn_whole("transactional_id", lambda b: {"throttle_time_ms": 0,
                                                  "error_code": TXN_DENIED}),
    27: _cluster(Op.CLUSTER_ACTION, lambda b: {"markers": [
        {"producer_id": m["producer_id"], "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p, "error_code": CLUSTER_DENIED}
                for p in t["partition_indexes"]]} for t in m["topics"]]}
        for m in b["markers"]]}),
    28: _txn_offset_commit,
    29: _cluster(Op.DESCRIBE, lambda b: {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                        "error_message": "Cluster authorization failed.",
                                        "resources": []}),
    30: _cluster(Op.ALTER, lambda b: {"throttle_time_ms": 0, "results": [
        {"error_code": CLUSTER_DENIED, "error_message": "Cluster authorization failed."}
        for _ in b["creations"]]}),
    31: _cluster(Op.ALTER, lambda b: {"throttle_time_ms": 0, "filter_results": [
        {"error_code": CLUSTER_DENIED, "error_message": "Cluster authorization failed.",
         "matching_acls": []} for _ in b["filters"]]}),
    32: _configs(Op.DESCRIBE_CONFIGS, "results"),
    33: _configs(Op.ALTER_CONFIGS, "responses"),
    35: _cluster(Op.DESCRIBE, lambda b: {"throttle_time_ms": 0,
                                         "error_code": CLUSTER_DENIED, "results": []}),
    37: _create_partitions,
    42: _delete_groups,
    43: _cluster(Op.ALTER, lambda b: {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                     "replica_election_results": [
        {"topic": t["topic"], "partition_result": [
            {"partition_id": p, "error_code": CLUSTER_DENIED,
             "error_message": "Cluster authorization failed."} for p in t["partitions"]]}
        for t in b["topic_partitions"] or []]}),
    44: _configs(Op.ALTER_CONFIGS, "responses"),
    45: _cluster(Op.ALTER, lambda b: {
        "throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
        "error_message": "Cluster authorization failed.", "responses": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": CLUSTER_DENIED,
                 "error_message": "Cluster authorization failed."} for p in t["partitions"]]}
            for t in b["topics"]]}),
    46: _cluster(Op.DESCRIBE, lambda b: {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                        "error_message": "Cluster authorization failed.",
                                        "topics": []}),
    47: _offset_delete,
    61: _describe_producers,
    65: _describe_transactions,
    66: _list_transactions,
    68: _consumer_group_heartbeat,
    69: _consumer_group_describe,
    75: _describe_topic_partitions,
    48: _cluster(Op.DESCRIBE_CONFIGS, lambda b: {
        "throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
        "error_message": "Cluster authorization failed.", "entries": None}),
    49: _cluster(Op.ALTER_CONFIGS, lambda b: {"throttle_time_ms": 0, "entries": [
        {"error_code": CLUSTER_DENIED, "error_message": "Cluster authorization failed.",
         "entity": e["entity"]} for e in b["entries"]]}),
    50: _cluster(Op.DESCRIBE, lambda b: {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                        "error_message": None, "results": []}),
    51: _cluster(Op.ALTER, lambda b: {"throttle_time_ms": 0, "results": [
        {"user": u["name"], "error_code": CLUSTER_DENIED, "error_message": None}
        for u in b["deletions"] + b["upsertions"]]}),
}


def principal_of(conn: Any) -> str:
    session = getattr(conn, "session", None)
    return session.principal if session is not None else ANONYMOUS


def topic_reader(authorizer: Authorizer | None, conn: Any) -> Callable[[str], bool] | None:
    """May the connection's principal READ a topic; None without an authorizer. For the
    Fetch handler: a fetch session's partitions are authorized again on every fetch (as
    Kafka's), not only those the request names: an ACL taken away, or another principal
    fetching with the session's id, reads nothing more."""
    if authorizer is None:
        return None
    principal = principal_of(conn)
    return lambda name: authorizer.authorize(principal, conn.host, Op.READ, TOPIC, name)


async def authorize_request(authorizer: Authorizer, conn: Any, api_key: int, version: int,
                            body: Body, metrics: Any, metadata: Any) -> Decision | None:
    """The dispatcher's hook: the connection's principal against the request
    (`metadata`: the cache whose topic_name resolves the request's topic ids)."""
    await authorizer.ready()
    decision = check(authorizer, principal_of(conn), conn.host, api_key, version, body,
                     metadata.topic_name)
    if decision is not None and decision.denied:
        metrics.authorization_failed()
    return decision
