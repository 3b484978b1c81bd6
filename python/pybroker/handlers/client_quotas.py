"""DescribeClientQuotas (48) and AlterClientQuotas (49): quota configs of users,
client ids and (user, client id) pairs, kept with the entity in the metadata store
(ZooKeeper's /config/users/..., /config/clients/... in cluster mode) and applied by
pybroker.security.client_quotas."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles
from pybroker.security.client_quotas import QUOTA_KEYS, entity_path, quotas_for
from pybroker.security.store import store_for

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

USER, CLIENT = "user", "client-id"
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
Entity = tuple[str | None, str | None]


def _entity_list(entity: Entity) -> list[dict[str, Any]]:
    out = []
    if entity[0] is not None:
        out.append({"entity_type": USER, "entity_name": entity[0] or None})
    if entity[1] is not None:
        out.append({"entity_type": CLIENT, "entity_name": entity[1] or None})
    return out


def _matches(entity: Entity, components: list[dict[str, Any]], strict: bool) -> bool:
    values = {USER: entity[0], CLIENT: entity[1]}
    for component in components:
        value = values.get(component["entity_type"])
        if value is None:
            return False
        match_type = component["match_type"]
        if match_type == MATCH_EXACT and value != (component["match"] or ""):
            return False
        if match_type == MATCH_DEFAULT and value != "":
            return False
        if match_type == MATCH_ANY and value == "":
            return False
    if strict:
        named = {c["entity_type"] for c in components}
        return named == {k for k, v in values.items() if v is not None}
    return True


@handles(48, (0, 1))
async def handle_describe_client_quotas(ctx: BrokerContext, request: Request
                                        ) -> dict[str, Any]:
    quotas = quotas_for(ctx.config, ctx.admin.backend)
    await quotas.ready()
    components = request.body["components"]
    kinds = [c["entity_type"] for c in components]
    if any(k not in (USER, CLIENT) for k in kinds) or len(set(kinds)) != len(kinds):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_REQUEST),
                "error_message": "Invalid quota filter components", "entries": None}
    entries = [{"entity": _entity_list(entity),
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
               for entity, values in sorted(quotas.configs.items(), key=lambda i: str(i[0]))
               if _matches(entity, components, request.body["strict"])]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


def _entity(items: list[dict[str, Any]]) -> Entity | str:
    user = client = None
    for item in items:
        name = item["entity_name"] or ""
        if item["entity_type"] == USER and user is None:
            user = name
        elif item["entity_type"] == CLIENT and client is None:
            client = name
        else:
            return f"Invalid quota entity type or duplicate: {item['entity_type']}"
    if user is None and client is None:
        return "Invalid empty client quota entity"
    return user, client


@handles(49, (0, 1))
async def handle_alter_client_quotas(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    quotas = quotas_for(ctx.config, ctx.admin.backend)
    await quotas.ready()
    store = store_for(ctx.admin.backend, ctx.config.log_dirs[0])
    results = []
    for item in request.body["entries"]:
        entity = _entity(item["entity"])
        problem = entity if isinstance(entity, str) else None
        for op in item["ops"]:
            if problem is None and op["key"] not in QUOTA_KEYS:
                problem = f"Invalid configuration key {op['key']}"
            elif problem is None and not op["remove"] and op["value"] <= 0:
                problem = f"Quota {op['key']} must be positive"
        if problem is not None or isinstance(entity, str):
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": problem, "entity": item["entity"]})
            continue
        if not request.body["validate_only"]:
            path = entity_path(*entity)
            config = await store.entity_config(path)
            for op in item["ops"]:
                if op["remove"]:
                    config.pop(op["key"], None)
                else:
                    config[op["key"]] = repr(float(op["value"]))
            await store.set_entity_config(path, config)
            quotas.set(entity, {k: float(v) for k, v in config.items() if k in QUOTA_KEYS})
        results.append({"error_code": 0, "error_message": None, "entity": item["entity"]})
    return {"throttle_time_ms": 0, "entries": results}
