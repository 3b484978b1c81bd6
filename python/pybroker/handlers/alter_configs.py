"""AlterConfigs (33): replace the whole override set of topics.

A topic resource's configs become exactly the given ones (keys left out fall
back to the broker defaults), validated like CreateTopics' (INVALID_CONFIG),
persisted in the metadata store and applied to the open logs. A broker resource
(this broker's id, or "" for the cluster-wide default) replaces its dynamic
configs (admin/broker_configs.py); keys that cannot change at run time get
Kafka's INVALID_CONFIG."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


def check_broker_resource(ctx: BrokerContext, name: str, config_names: list[str]) -> None:
    """Broker resources: the id must be ours (or empty: the cluster default); without
    dynamic configs (ctx.broker_configs None) no key can be changed at run time."""
    if name not in ("", str(ctx.broker_id)):
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {ctx.broker_id} or empty string, "
                         f"but received {name}")
    if config_names and ctx.broker_configs is None:
        listed = ", ".join(sorted(config_names))
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"Invalid config value for resource ConfigResource(type=BROKER, "
                         f"name='{name}'): Cannot update these configs dynamically: Set({listed})")


def response(resource: dict[str, Any], code: int = 0, message: str | None = None
             ) -> dict[str, Any]:
    return {"error_code": code, "error_message": message,
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"]}


def duplicate_resources(resources: list[dict[str, Any]]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    dups: set[tuple[int, str]] = set()
    for r in resources:
        key = (r["resource_type"], r["resource_name"])
        (dups if key in seen else seen).add(key)
    return dups


@handles(33, (0, 1))
async def handle_alter_configs(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    validate_only = bool(body["validate_only"])
    dups = duplicate_resources(body["resources"])
    responses = []
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        configs = {c["name"]: c["value"] for c in resource["configs"]}
        try:
            if (kind, name) in dups:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Error due to duplicate config resources")
            if len(configs) != len(resource["configs"]):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            if kind == TOPIC:
                await ctx.admin.alter_topic_configs(name, configs, validate_only)
            elif kind == BROKER:
                check_broker_resource(ctx, name, list(configs))
                if ctx.broker_configs is not None:
                    await ctx.broker_configs.alter(name, configs, validate_only)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}")
            responses.append(response(resource))
        except KafkaError as exc:
            responses.append(response(resource, int(exc.code), exc.message))
    return {"throttle_time_ms": 0, "responses": responses}
