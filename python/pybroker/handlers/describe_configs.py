"""DescribeConfigs (32): a topic's or the broker's configuration, with sources."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.config import (
    BROKER_CONFIGS,
    TOPIC_KEYS,
    ConfigSource,
    format_value,
    topic_key_type,
)
from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles
from pybroker.log.manager import topic_config

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


@handles(32, (1, 3))
async def handle_describe_configs(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    synonyms = bool(body["include_synonyms"])
    docs = bool(body["include_documentation"])
    results = []
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        wanted = resource["configuration_keys"]
        if kind == TOPIC:
            record = ctx.metadata.topic(name)
            if record is None:
                results.append(error(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"Topic {name} does not exist"))
                continue
            entries = topic_entries(ctx, record.name, synonyms, docs)
        elif kind == BROKER:
            if name not in ("", str(ctx.broker_id)):
                results.append(error(resource, ErrorCode.INVALID_REQUEST,
                                     f"Unexpected broker id, expected {ctx.broker_id}"))
                continue
            entries = broker_entries(ctx, synonyms, docs)
        else:
            results.append(error(resource, ErrorCode.INVALID_REQUEST,
                                 f"Unsupported resource type {kind}"))
            continue
        if wanted is not None:
            entries = [e for e in entries if e["name"] in wanted]
        results.append({"error_code": 0, "error_message": None, "resource_type": kind,
                        "resource_name": name, "configs": entries})
    return {"throttle_time_ms": 0, "results": results}


def error(resource: dict[str, Any], code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message,
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"], "configs": []}


def topic_entries(ctx: BrokerContext, topic: str, synonyms: bool,
                  docs: bool) -> list[dict[str, Any]]:
    record = ctx.metadata.topic(topic)
    assert record is not None
    config = topic_config(ctx.config, record)
    entries = []
    for name in sorted(TOPIC_KEYS):
        key = TOPIC_KEYS[name]
        source = config.source(name)
        value = config[name]
        syn = []
        if synonyms:
            if source is ConfigSource.DYNAMIC_TOPIC_CONFIG:
                syn.append({"name": name, "value": format_value(key, value),
                            "source": int(source)})
            syn.append({"name": key.name, "value": format_value(key, ctx.config.topic_default(
                name)), "source": int(ctx.config.topic_default_source(name))})
        entries.append({
            "name": name,
            "value": format_value(key, value),
            "read_only": False,
            "is_default": source is ConfigSource.DEFAULT_CONFIG,
            "config_source": int(source),
            "is_sensitive": False,
            "synonyms": syn,
            "config_type": int(topic_key_type(name)),
            "documentation": key.doc if docs else None,
        })
    return entries


def broker_entries(ctx: BrokerContext, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    entries = []
    for key in BROKER_CONFIGS:
        source = ctx.config.source(key.name)
        value = format_value(key, ctx.config[key.name])
        entries.append({
            "name": key.name,
            "value": value,
            "read_only": True,
            "is_default": source is ConfigSource.DEFAULT_CONFIG,
            "config_source": int(source),
            "is_sensitive": False,
            "synonyms": [{"name": key.name, "value": value, "source": int(source)}]
            if synonyms else [],
            "config_type": int(key.type),
            "documentation": key.doc if docs else None,
        })
    return entries
