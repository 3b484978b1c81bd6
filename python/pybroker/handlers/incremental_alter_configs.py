"""IncrementalAlterConfigs (44): SET / DELETE / APPEND / SUBTRACT single keys.

Starts from a topic's current overrides: SET replaces one value, DELETE drops
the override (back to the broker default), APPEND / SUBTRACT add or remove
items of a LIST key (cleanup.policy) starting from its current effective
value. The result is validated and stored as AlterConfigs does."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pybroker.admin.broker_configs import entity_name
from pybroker.config import BY_NAME, TOPIC_KEYS, ConfigType, format_value, topic_key_type
from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.alter_configs import (
    BROKER,
    TOPIC,
    check_broker_resource,
    duplicate_resources,
    response,
)
from pybroker.handlers.registry import handles
from pybroker.log.manager import topic_config

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
GROUP = 32


def apply_ops(ctx: BrokerContext, topic: str, ops: list[dict[str, Any]]) -> dict[str, str | None]:
    """The topic's new override set after `ops`."""
    record = ctx.metadata.topic(topic)
    if record is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist")
    effective = topic_config(ctx.config, record)
    return apply_to(dict(record.configs), ops, lambda name: (
        format_value(TOPIC_KEYS[name], effective[name])
        if name in TOPIC_KEYS and topic_key_type(name) is ConfigType.LIST else None))


def apply_broker_ops(ctx: BrokerContext, name: str, ops: list[dict[str, Any]]
                     ) -> dict[str, str | None]:
    """A broker entity's new dynamic config set after `ops` ("" is the default)."""
    assert ctx.broker_configs is not None
    stored = ctx.broker_configs.entity(entity_name(name))
    return apply_to(dict(stored), ops, lambda key: (
        format_value(BY_NAME[key], ctx.config[key])
        if key in BY_NAME and BY_NAME[key].type is ConfigType.LIST else None))


def apply_to(configs: dict[str, str | None], ops: list[dict[str, Any]],
             current_list: Callable[[str], str | None]) -> dict[str, str | None]:
    """`configs` after `ops`; current_list(name) is a LIST key's effective value (None
    for any other key: APPEND / SUBTRACT are refused on it)."""
    for op in ops:
        name, kind, value = op["name"], op["config_operation"], op["value"]
        if kind == SET:
            if value is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Null value not supported for : {name}")
            configs[name] = value
        elif kind == DELETE:
            configs.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            current = current_list(name)
            if current is None:
                verb = "append" if kind == APPEND else "subtract"
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Config value {verb} is not allowed for config key: {name}")
            items = [i for i in current.split(",") if i]
            given = [i.strip() for i in (value or "").split(",") if i.strip()]
            if kind == APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            configs[name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {kind}")
    return configs


@handles(44, (0, 0))
async def handle_incremental_alter_configs(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    validate_only = bool(body["validate_only"])
    dups = duplicate_resources(body["resources"])
    responses = []
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        ops = resource["configs"]
        try:
            if (kind, name) in dups:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Error due to duplicate config resources")
            if len({op["name"] for op in ops}) != len(ops):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            if kind == TOPIC:
                await ctx.admin.alter_topic_configs(name, apply_ops(ctx, name, ops),
                                                    validate_only)
            elif kind == BROKER:
                check_broker_resource(ctx, name, [op["name"] for op in ops])
                if ctx.broker_configs is not None:
                    await ctx.broker_configs.alter(name, apply_broker_ops(ctx, name, ops),
                                                   validate_only)
            elif kind == GROUP and ctx.group_configs is not None:
                # no key of a group is a list: APPEND / SUBTRACT are refused
                await ctx.group_configs.alter(
                    name, apply_to(ctx.group_configs.overrides(name), ops, lambda _: None),
                    validate_only)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}")
            responses.append(response(resource))
        except KafkaError as exc:
            responses.append(response(resource, int(exc.code), exc.message))
    return {"throttle_time_ms": 0, "responses": responses}
