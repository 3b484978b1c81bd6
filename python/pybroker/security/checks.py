"""What each request needs the authorizer to allow, and Kafka's answer when it
does not (KafkaApis' checks): topics, groups, the cluster and transactional ids.

A check runs before the handler. It may answer the whole request itself (every
resource denied, or one the request cannot go without), or drop the denied
topics from the request and return a `merge` that puts their errors
(TOPIC_AUTHORIZATION_FAILED, ...) into the handler's response, so a request with
one denied topic still succeeds for the others, as in Kafka. Metadata and the
"every group / every offset" forms leave out what the principal may not describe.
APIs without a check here (ApiVersions, the SASL requests) need no authorization."""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable
from typing import Any

from pybroker.errors import ErrorCode
from pybroker.security.acls import CLUSTER_NAME, Operation, ResourceType
from pybroker.security.authorizer import Authorizer

Body = dict[str, Any]
Allowed = Callable[[Operation, ResourceType, str], bool]

TOPIC, GROUP, CLUSTER, TXN = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                              ResourceType.TRANSACTIONAL_ID)
Op = Operation
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TXN_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


#: topic id -> name (or None), for the APIs that name topics by id (Fetch v13+,
#: DeleteTopics v6+); set per request by authorize_request
RESOLVE: contextvars.ContextVar[Callable[[Any], str | None]] = contextvars.ContextVar(
    "RESOLVE", default=lambda topic_id: None)


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
          body: Body) -> Decision | None:
    def allowed(op: Operation, rtype: ResourceType, name: str) -> bool:
        return authorizer.authorize(principal, host, op, rtype, name)

    fn = CHECKS.get(api_key)
    return fn(allowed, version, body) if fn is not None else None


# --- per API ------------------------------------------------------------------------------
def _produce(allowed: Allowed, version: int, body: Body) -> Decision | None:
    txn = body.get("transactional_id")
    code = TXN_DENIED if txn and not allowed(Op.WRITE, TXN, txn) else TOPIC_DENIED
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


def _fetch(allowed: Allowed, version: int, body: Body) -> Decision | None:
    follower = body.get("replica_id", -1) >= 0
    if follower and not allowed(Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return Decision(response={"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                  "session_id": 0, "responses": []}, denied=True)
    if follower:
        return None

    def entry(t: Body) -> Body:
        return {"topic": t.get("topic"), "topic_id": t.get("topic_id"), "partitions": [
            {"partition_index": p["partition"], "error_code": TOPIC_DENIED,
             "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
             "records": b""} for p in t["partitions"]]}

    def ok(t: Body) -> bool:
        # v13+ names topics by id; an id this broker does not know is the handler's
        # UNKNOWN_TOPIC_ID, not an authorization question
        name = t["topic"] if version <= 12 else RESOLVE.get()(t["topic_id"])
        return name is None or allowed(Op.READ, TOPIC, name)

    keep, drop = _split(body["topics"] or [], lambda t: t, ok)
    if not drop:
        return None
    extra = [entry(t) for t in drop]
    if not keep:
        return Decision(response={"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                                  "responses": extra}, denied=True)
    body["topics"] = keep
    return Decision(merge=_merge_into("responses", extra), denied=True)


def _list_offsets(allowed: Allowed, version: int, body: Body) -> Decision | None:
    return _topic_level(body, "topics", "topics", "name",
                        lambda n: allowed(Op.DESCRIBE, TOPIC, n),
                        lambda t: {"name": t["name"], "partitions": _partitions(
                            t, "partitions", TOPIC_DENIED, timestamp=-1, offset=-1)},
                        {"throttle_time_ms": 0})


def _metadata(allowed: Allowed, version: int, body: Body) -> Decision | None:
    def describable(response: Body) -> None:
        response["topics"] = [t for t in response["topics"]
                              if allowed(Op.DESCRIBE, TOPIC, t["name"])]

    requested = body["topics"]
    if requested is None or (version == 0 and not requested):
        return Decision(merge=describable)
    if any(t.get("name") is None for t in requested):
        # v10+ looks topics up by id: what the principal may not describe is left out
        return Decision(merge=describable)
    keep, drop = _split(requested, lambda t: t["name"], lambda n: allowed(Op.DESCRIBE, TOPIC, n))
    if version >= 4 and body.get("allow_auto_topic_creation") and not allowed(
            Op.CREATE, CLUSTER, CLUSTER_NAME):
        body["allow_auto_topic_creation"] = all(allowed(Op.CREATE, TOPIC, t["name"])
                                                for t in keep)
    if not drop:
        return None
    body["topics"] = keep
    extra = [{"error_code": TOPIC_DENIED, "name": t["name"], "is_internal": False,
              "partitions": [], "topic_authorized_operations": -2147483648} for t in drop]
    if keep:
        return Decision(merge=_merge_into("topics", extra), denied=True)
    # v1+: [] is "no topics" (the brokers still come back); v0's "every topic" is replaced
    return Decision(merge=lambda response: response.update(topics=extra), denied=True)


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
        def describable(response: Body) -> None:
            response["topics"] = [t for t in response["topics"]
                                  if allowed(Op.DESCRIBE, TOPIC, t["name"])]
        return Decision(merge=describable)
    return _topic_level(body, "topics", "topics", "name",
                        lambda n: allowed(Op.DESCRIBE, TOPIC, n),
                        lambda t: {"name": t["name"], "partitions": [
                            {"partition_index": p, "committed_offset": -1,
                             "error_code": TOPIC_DENIED} for p in t["partition_indexes"]]},
                        {"throttle_time_ms": 0, "error_code": 0})


def _find_coordinator(allowed: Allowed, version: int, body: Body) -> Decision | None:
    txn = body.get("key_type", 0) == 1
    key = body.get("key", "")
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
    if version >= 6:  # names or ids
        def ok(t: Body) -> bool:
            name = t["name"] if t.get("name") is not None else RESOLVE.get()(t["topic_id"])
            return name is None or allowed(Op.DELETE, TOPIC, name)

        keep, drop = _split(body["topics"] or [], lambda t: t, ok)
        if not drop:
            return None
        extra = [{"name": t.get("name"), "topic_id": t.get("topic_id"),
                  "error_code": TOPIC_DENIED} for t in drop]
        if not keep:
            return Decision(response={"throttle_time_ms": 0, "responses": extra}, denied=True)
        body["topics"] = keep
        return Decision(merge=_merge_into("responses", extra), denied=True)
    return _topic_level(body, "topic_names", "responses", "",
                        lambda n: allowed(Op.DELETE, TOPIC, n),
                        lambda n: {"name": n, "error_code": TOPIC_DENIED},
                        {"throttle_time_ms": 0})


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
            return allowed(op, CLUSTER, CLUSTER_NAME)

        keep, drop = [r for r in body["resources"] if ok(r)], [
            r for r in body["resources"] if not ok(r)]
        if not drop:
            return None
        extra = [{"error_code": TOPIC_DENIED if r["resource_type"] == 2 else CLUSTER_DENIED,
                  "error_message": "Authorization failed.", "resource_type": r["resource_type"],
                  "resource_name": r["resource_name"], "configs": []} for r in drop]
        if not keep:
            return Decision(response={"throttle_time_ms": 0, resp_key: extra}, denied=True)
        body["resources"] = keep
        return Decision(merge=_merge_into(resp_key, extra), denied=True)
    return fn


def _init_producer_id(allowed: Allowed, version: int, body: Body) -> Decision | None:
    txn = body["transactional_id"]
    if txn:
        ok, code = allowed(Op.WRITE, TXN, txn), TXN_DENIED
    else:
        ok, code = allowed(Op.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME), CLUSTER_DENIED
    if ok:
        return None
    return Decision(response={"throttle_time_ms": 0, "error_code": code, "producer_id": -1,
                              "producer_epoch": -1}, denied=True)


def _txn_whole(response: Callable[[Body], Body]) -> Callable[[Allowed, int, Body],
                                                             Decision | None]:
    def fn(allowed: Allowed, version: int, body: Body) -> Decision | None:
        txn = body.get("transactional_id") or body.get("v3_and_below_transactional_id")
        if txn is None or allowed(Op.WRITE, TXN, txn):
            return None
        return Decision(response=response(body), denied=True)
    return fn


def _cluster(op: Operation, response: Callable[[Body], Body]) -> Callable[
        [Allowed, int, Body], Decision | None]:
    def fn(allowed: Allowed, version: int, body: Body) -> Decision | None:
        if allowed(op, CLUSTER, CLUSTER_NAME):
            return None
        return Decision(response=response(body), denied=True)
    return fn


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
    24: _txn_whole(lambda b: {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": t["name"], "results_by_partition": [
            {"partition_index": p, "partition_error_code": TXN_DENIED}
            for p in t["partitions"]]} for t in b.get("v3_and_below_topics") or []]}),
    25: _txn_whole(lambda b: {"throttle_time_ms": 0, "error_code": TXN_DENIED}),
    26: _txn_whole(lambda b: {"throttle_time_ms": 0, "error_code": TXN_DENIED}),
    27: _cluster(Op.CLUSTER_ACTION, lambda b: {"markers": [
        {"producer_id": m["producer_id"], "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p, "error_code": CLUSTER_DENIED}
                for p in t["partition_indexes"]]} for t in m["topics"]]}
        for m in b["markers"]]}),
    28: _txn_whole(lambda b: {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": _partitions(t, "partitions", TXN_DENIED)}
        for t in b["topics"]]}),
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
    44: _configs(Op.ALTER_CONFIGS, "responses"),
    47: _offset_delete,
    61: _describe_producers,
    65: _describe_transactions,
    66: _list_transactions,
    68: _group_whole(Op.READ, {"throttle_time_ms": 0, "error_message": None,
                               "member_id": None, "member_epoch": -1,
                               "heartbeat_interval_ms": 0, "assignment": None}),
    69: _consumer_group_describe,
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


async def authorize_request(authorizer: Authorizer, conn: Any, api_key: int, version: int,
                            body: Body, metrics: Any, metadata: Any = None) -> Decision | None:
    """The dispatcher's hook: the connection's principal against the request
    (`metadata`: the cache topic ids are resolved to names with)."""
    await authorizer.ready()
    if metadata is not None:
        RESOLVE.set(lambda topic_id: getattr(metadata.topic_by_id(topic_id), "name", None))
    session = getattr(conn, "session", None)
    principal = session.principal if session is not None else "User:ANONYMOUS"
    decision = check(authorizer, principal, conn.host, api_key, version, body)
    if decision is not None and decision.denied:
        metrics.authorization_failed()
    return decision
