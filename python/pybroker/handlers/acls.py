"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): the authorizer's ACLs,
stored in the metadata store (Kafka's /kafka-acl layout in ZooKeeper). Without an
authorizer (authorizer.class.name unset) they answer SECURITY_DISABLED, as Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles
from pybroker.security.acls import (
    Entry,
    Filter,
    Operation,
    Pattern,
    PatternType,
    Permission,
    ResourceType,
)
from pybroker.security.authorizer import authorizer_for, valid_binding

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

DISABLED = "No Authorizer is configured on the broker"


def _enum(cls: Any, value: int) -> Any:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN


def _filter(item: dict[str, Any]) -> Filter:
    return Filter(_enum(ResourceType, item["resource_type_filter"]),
                  item["resource_name_filter"],
                  _enum(PatternType, item.get("pattern_type_filter", 3)),
                  item["principal_filter"], item["host_filter"],
                  _enum(Operation, item["operation"]),
                  _enum(Permission, item["permission_type"]))


@handles(29, (1, 3))
async def handle_describe_acls(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    authorizer = authorizer_for(ctx.config, ctx.admin.backend)
    if authorizer is None:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.SECURITY_DISABLED),
                "error_message": DISABLED, "resources": []}
    await authorizer.ready()
    flt = _filter(request.body)
    resources = [{"resource_type": int(p.resource_type), "resource_name": p.name,
                  "pattern_type": int(p.pattern_type),
                  "acls": [{"principal": e.principal, "host": e.host,
                            "operation": int(e.operation), "permission_type": int(e.permission)}
                           for e in entries]}
                 for p, entries in authorizer.describe(flt).items()]
    # "" as Kafka's AclApis, which leaves the message unset (its schema default) on success
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": "",
            "resources": resources}


@handles(30, (1, 3))
async def handle_create_acls(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    creations = request.body["creations"]
    authorizer = authorizer_for(ctx.config, ctx.admin.backend)
    if authorizer is None:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": DISABLED}
            for _ in creations]}
    await authorizer.ready()
    results, bindings = [], []
    for item in creations:
        pattern = Pattern(_enum(ResourceType, item["resource_type"]), item["resource_name"],
                          _enum(PatternType, item.get("resource_pattern_type", 3)))
        entry = Entry(item["principal"], item["host"], _enum(Operation, item["operation"]),
                      _enum(Permission, item["permission_type"]))
        problem = valid_binding(pattern, entry)
        if problem is not None:
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": problem})
            continue
        bindings.append((pattern, entry))
        results.append({"error_code": 0, "error_message": ""})  # unset in Kafka: ""
    await authorizer.create(bindings)
    return {"throttle_time_ms": 0, "results": results}


@handles(31, (1, 3))
async def handle_delete_acls(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    filters = request.body["filters"]
    authorizer = authorizer_for(ctx.config, ctx.admin.backend)
    if authorizer is None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": DISABLED,
             "matching_acls": []} for _ in filters]}
    await authorizer.ready()
    results = []
    for item in filters:
        removed = await authorizer.delete(_filter(item))
        results.append({"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": int(p.resource_type),
             "resource_name": p.name, "pattern_type": int(p.pattern_type),
             "principal": e.principal, "host": e.host, "operation": int(e.operation),
             "permission_type": int(e.permission)} for p, e in removed]})
    return {"throttle_time_ms": 0, "filter_results": results}
