"""DescribeConfigs (32): a topic's, the broker's or a group's configuration, with
sources."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.admin.group_configs import GROUP_CONFIGS, GroupConfigs
from pybroker.config import (
    BROKER_CONFIGS,
    BY_NAME,
    DYNAMIC_BROKER_KEYS,
    TOPIC_KEYS,
    ConfigSource,
    ConfigType,
    format_value,
    topic_key_type,
)
from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles
from pybroker.log.manager import topic_config

if TYPE_CHECKING:
    from pybroker.coordination.base import TopicRecord
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32


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
                # Kafka's ConfigHelper sets no message here ("", the generated default)
                results.append(error(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ""))
                continue
            entries = topic_entries(ctx, record, synonyms, docs)
        elif kind == BROKER:
            if name not in ("", str(ctx.broker_id)):
                results.append(error(resource, ErrorCode.INVALID_REQUEST,
                                     f"Unexpected broker id, expected {ctx.broker_id}"))
                continue
            # "" is the cluster-wide default: Kafka shows only its dynamic configs
            entries = (broker_entries(ctx, synonyms, docs) if name
                       else default_entries(ctx, synonyms, docs))
        elif kind == GROUP and ctx.group_configs is not None:
            if not name:
                results.append(error(resource, ErrorCode.INVALID_REQUEST,
                                     "Group name must not be empty"))
                continue
            entries = group_entries(ctx.group_configs, name, synonyms, docs)
        else:
            results.append(error(resource, ErrorCode.INVALID_REQUEST,
                                 f"Unsupported resource type {kind}"))
            continue
        if wanted is not None:
            entries = [e for e in entries if e["name"] in wanted]
        # "" as Kafka's ConfigHelper, which leaves the message unset on success (the
        # schema's default for this nullable string is "", not null)
        results.append({"error_code": 0, "error_message": "", "resource_type": kind,
                        "resource_name": name, "configs": entries})
    return {"throttle_time_ms": 0, "results": results}


def error(resource: dict[str, Any], code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message,
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"], "configs": []}


def topic_entries(ctx: BrokerContext, record: TopicRecord, synonyms: bool,
                  docs: bool) -> list[dict[str, Any]]:
    """Every topic config of ``record`` (its overrides, else the broker's defaults)."""
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
            syn += [{"name": n, "value": format_value(BY_NAME[n], v), "source": int(src)}
                    for n, v, src in ctx.config.topic_default_synonyms(name)]
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
    """This broker's configs: each key's effective value and where it comes from, its
    synonyms every layer that sets it (dynamic per-broker, dynamic default, static,
    default); the keys that can change at run time are not read-only."""
    entries = []
    for key in BROKER_CONFIGS:
        # Kafka's: the source is that of the synonym in force (log.retention.hours
        # shows the source of a log.retention.ms that overrides it), the value its own
        found = ctx.config.synonyms(key.name)
        source = found[0][2] if found else ConfigSource.DEFAULT_CONFIG
        value = format_value(key, ctx.config[key.name])
        entries.append({
            "name": key.name,
            "value": value,
            "read_only": key.name not in DYNAMIC_BROKER_KEYS,
            "is_default": source is ConfigSource.DEFAULT_CONFIG,
            "config_source": int(source),
            "is_sensitive": key.type is ConfigType.PASSWORD,
            "synonyms": [{"name": n, "value": format_value(BY_NAME[n], v), "source": int(src)}
                         for n, v, src in found] if synonyms else [],
            "config_type": int(key.type),
            "documentation": key.doc if docs else None,
        })
    return entries


def default_entries(ctx: BrokerContext, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    """The cluster-wide dynamic defaults (the BROKER resource named "")."""
    source = int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    entries = []
    for name, value in sorted(ctx.config.dynamic_default.items()):
        key = BY_NAME[name]
        text = format_value(key, value)
        entries.append({
            "name": name, "value": text, "read_only": False, "is_default": False,
            "config_source": source, "is_sensitive": False,
            "synonyms": [{"name": name, "value": text, "source": source}] if synonyms else [],
            "config_type": int(key.type), "documentation": key.doc if docs else None,
        })
    return entries


def group_entries(configs: GroupConfigs, group: str, synonyms: bool,
                  docs: bool) -> list[dict[str, Any]]:
    """Every group config key: the group's override (DYNAMIC_GROUP_CONFIG) or the
    broker's default (DEFAULT_CONFIG), as Kafka's ConfigHelper shows them."""
    overrides = configs.overrides(group)
    entries = []
    for key in GROUP_CONFIGS:
        value = str(configs.effective(group, key.name))
        source = (ConfigSource.DYNAMIC_GROUP_CONFIG if key.name in overrides
                  else ConfigSource.DEFAULT_CONFIG)
        entries.append({
            "name": key.name, "value": value, "read_only": False,
            "is_default": source is ConfigSource.DEFAULT_CONFIG,
            "config_source": int(source), "is_sensitive": False,
            "synonyms": ([{"name": key.name, "value": value, "source": int(source)}]
                         if synonyms else []),
            "config_type": int(key.type), "documentation": key.doc if docs else None,
        })
    return entries
