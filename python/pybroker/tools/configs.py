"""`pybroker configs`: kafka-configs.sh --describe / --alter.

    pybroker configs --bootstrap-server B --entity-type topics --entity-name T --describe
    pybroker configs --bootstrap-server B --entity-type brokers --entity-name 1 \\
        --alter --add-config log.retention.ms=3600000,log.cleanup.policy=[delete,compact]
    pybroker configs --bootstrap-server B --entity-type brokers --entity-default \\
        --alter --delete-config log.retention.ms

Output is Kafka's ConfigCommand's: `Dynamic configs for topic T are:` (or `All configs
for broker 1 are:` with --all, `Default configs for brokers in the cluster are:`) then
one line per config, sorted, `  name=value sensitive=false synonyms={SOURCE:name=value,
...}`; alterations print `Completed updating config for topic T.` /
`Completed updating default config for brokers in the cluster.`. Without
--entity-name, every entity of the type is described (for brokers, each broker then
the default).

Entity types are pluggable: an `EntityType` knows how to list its entities, whether
it has a default, which broker to ask, and how to describe and alter one (by default
DescribeConfigs / IncrementalAlterConfigs on its resource type); `ENTITY_TYPES` maps
--entity-type names to them (topics and brokers here; users and clients, whose
configs are quotas, can register theirs with their own describe / alter). Requests go
over pybroker's own protocol client (tools/_wire.py), which keeps every synonym of
a key: a broker key set in several layers is listed once per layer, as Kafka does."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from pybroker.config import ConfigSource
from pybroker.tools import _user_client_configs as user_client_configs
from pybroker.tools._common import DEFAULT_TIMEOUT_MS, ToolError, add_bootstrap, read_properties
from pybroker.tools._retry import check, retrying
from pybroker.tools._wire import WireClient

COMMAND = "configs"
HELP = "describe or alter topic and broker configs (kafka-configs.sh)"

DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44
METADATA = 3
SET, DELETE = 0, 1
#: the name kafka-configs.sh shows for the cluster-wide default entity
DEFAULT_ENTITY = "<default>"


class EntityType:
    """One --entity-type: its name (plural, as kafka-configs.sh takes it), the
    DescribeConfigs resource type, and how its entities are found and addressed."""

    name = ""
    resource_type = 0
    has_default = False
    #: the config source a plain --describe shows (Kafka's dynamic configs)
    dynamic_source = ConfigSource.UNKNOWN

    @property
    def singular(self) -> str:
        return self.name[:-1]

    def entities(self, client: WireClient) -> list[str]:
        raise NotImplementedError

    def node(self, entity: str) -> int | None:
        """The broker a request about `entity` must go to (None: any)."""
        return None

    def shown_source(self, entity: str) -> ConfigSource:
        return self.dynamic_source

    def describe(self, client: WireClient, entity: str) -> list[dict[str, Any]]:
        """The entity's config entries as DescribeConfigs gives them (name, value,
        config_source, is_sensitive, synonyms [{name, value, source}]). Types whose
        configs are not DescribeConfigs resources (quotas) override this and alter."""
        resource = "" if entity == DEFAULT_ENTITY else entity
        answer = client.request(DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": self.resource_type, "resource_name": resource,
                           "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False,
        }, node=self.node(entity))
        result = check(answer["results"][0], f"describing {self.singular} {entity}")
        if result["error_code"]:
            raise ToolError(result["error_message"] or f"error code {result['error_code']}")
        return list(result["configs"])

    def alter(self, client: WireClient, entity: str, added: dict[str, str],
              deleted: list[str]) -> None:
        """Set `added` and remove `deleted` (IncrementalAlterConfigs)."""
        ops = ([{"name": k, "config_operation": SET, "value": v} for k, v in added.items()]
               + [{"name": k, "config_operation": DELETE, "value": None} for k in deleted])
        resource = "" if entity == DEFAULT_ENTITY else entity
        answer = client.request(INCREMENTAL_ALTER_CONFIGS, {
            "resources": [{"resource_type": self.resource_type, "resource_name": resource,
                           "configs": ops}],
            "validate_only": False,
        }, node=self.node(entity))
        result = check(answer["responses"][0], f"altering {self.singular} {entity}")
        if result["error_code"]:
            raise ToolError(result["error_message"] or f"error code {result['error_code']}")


class Topics(EntityType):
    name = "topics"
    resource_type = 2
    dynamic_source = ConfigSource.DYNAMIC_TOPIC_CONFIG

    def entities(self, client: WireClient) -> list[str]:
        answer = client.request(METADATA, {"topics": None, "allow_auto_topic_creation": False})
        return sorted(t["name"] for t in answer["topics"])


class Brokers(EntityType):
    name = "brokers"
    resource_type = 4
    has_default = True
    dynamic_source = ConfigSource.DYNAMIC_BROKER_CONFIG

    def entities(self, client: WireClient) -> list[str]:
        return [str(b) for b in sorted(client.brokers())] + [DEFAULT_ENTITY]

    def node(self, entity: str) -> int | None:
        # a broker's own configs come from that broker; the default from any
        if entity == DEFAULT_ENTITY:
            return None
        if not entity.isdigit():
            raise ToolError(f"The entity name for brokers must be a valid integer broker id, "
                            f"but it is: {entity}")
        return int(entity)

    def shown_source(self, entity: str) -> ConfigSource:
        if entity == DEFAULT_ENTITY:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        return ConfigSource.DYNAMIC_BROKER_CONFIG


ENTITY_TYPES: dict[str, EntityType] = {t.name: t for t in (Topics(), Brokers())}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of client configs "
                             "(default.api.timeout.ms: how long to wait, default 30000)")
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true",
                         help="List configs for the given entity.")
    actions.add_argument("--alter", action="store_true",
                         help="Alter the configuration for the entity.")
    parser.add_argument("--entity-type", required=True, help=", ".join(ENTITY_TYPES))
    names = parser.add_mutually_exclusive_group()
    names.add_argument("--entity-name", help="name of the entity (topic name, broker id)")
    names.add_argument("--entity-default", action="store_true",
                       help="the cluster-wide default (brokers)")
    parser.add_argument("--all", action="store_true",
                        help="with --describe, every config, not only the dynamic ones")
    parser.add_argument("--add-config", metavar="K=V,K2=[V1,V2]",
                        help="configs to set; a list value in square brackets")
    parser.add_argument("--add-config-file", metavar="FILE",
                        help="a properties file of configs to set")
    parser.add_argument("--delete-config", metavar="K,K2", help="configs to remove")


def run(args: argparse.Namespace) -> int:
    if user_client_configs.handles(args):  # users / clients: quotas, SCRAM (issue 16)
        return user_client_configs.run(args)
    try:
        kind = ENTITY_TYPES.get(args.entity_type)
        if kind is None:
            raise ToolError(f"--entity-type must be one of {', '.join(ENTITY_TYPES)}")
        if args.entity_default and not kind.has_default:
            raise ToolError(f"--entity-default is not valid for --entity-type {kind.name}")
        props = read_properties(args.command_config)
        timeout_ms = int(props.get("default.api.timeout.ms", DEFAULT_TIMEOUT_MS))
        entity = DEFAULT_ENTITY if args.entity_default else args.entity_name
        with WireClient(args.bootstrap_server, timeout_ms) as client:
            # a whole describe or alter is asked again after a retriable error (both are
            # idempotent, and describe prints once every answer is in)
            if args.describe:
                retrying(lambda: describe(client, kind, entity, args.all), timeout_ms / 1000,
                         "describing configs")
            else:
                retrying(lambda: alter(client, kind, entity, args), timeout_ms / 1000,
                         "altering configs")
        return 0
    except BrokenPipeError:  # `| head` closed stdout: the CLI ends quietly
        raise
    except (ToolError, OSError) as exc:
        # one line (the project's rule for tool failures), in Kafka's words
        print(f"Error while executing config command : {exc}", file=sys.stderr)
        return 1


# --- describe --------------------------------------------------------------------------

def describe(client: WireClient, kind: EntityType, entity: str | None, show_all: bool) -> None:
    # every answer first, then the output: a retried describe prints nothing twice
    answers = [(name, kind.describe(client, name))
               for name in ([entity] if entity is not None else kind.entities(client))]
    for name, entries in answers:
        if name == DEFAULT_ENTITY:
            print(f"Default configs for {kind.name} in the cluster are:")
        else:
            print(f"{'All' if show_all else 'Dynamic'} configs for {kind.singular} {name} are:")
        for entry in sorted(entries, key=lambda e: e["name"]):
            if show_all or entry["config_source"] == kind.shown_source(name):
                print("  " + format_entry(entry))


def format_entry(entry: dict[str, Any]) -> str:
    """Kafka's line: name=value sensitive=false synonyms={SOURCE:name=value, ...}."""
    synonyms = ", ".join(f"{source_name(s['source'])}:{s['name']}={_text(s['value'])}"
                         for s in entry["synonyms"])
    sensitive = "true" if entry["is_sensitive"] else "false"
    return f"{entry['name']}={_text(entry['value'])} sensitive={sensitive} synonyms={{{synonyms}}}"


def source_name(code: int) -> str:
    try:
        return ConfigSource(code).name
    except ValueError:
        return ConfigSource.UNKNOWN.name


def _text(value: str | None) -> str:
    return "null" if value is None else value


# --- alter -----------------------------------------------------------------------------

def alter(client: WireClient, kind: EntityType, entity: str | None,
          args: argparse.Namespace) -> None:
    if entity is None:
        raise ToolError("an entity name (--entity-name, or --entity-default) is required "
                        "with --alter")
    added = parse_config_list(args.add_config or "")
    added.update(read_properties(args.add_config_file))
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not added and not deleted:
        raise ToolError("At least one of --add-config, --add-config-file or --delete-config "
                        "must be specified with --alter")
    both = sorted(set(added) & set(deleted))
    if both:
        raise ToolError(f"Invalid config(s): {','.join(both)} are both added and deleted")
    kind.alter(client, entity, added, deleted)
    if entity == DEFAULT_ENTITY:
        print(f"Completed updating default config for {kind.name} in the cluster.")
    else:
        print(f"Completed updating config for {kind.singular} {entity}.")


_ITEM = re.compile(r"\s*([^=,\s][^=,]*?)\s*=\s*(\[[^\]]*\]|[^,]*)\s*(?:,|$)")


def parse_config_list(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config: k=v pairs separated by commas; a value with
    commas goes in square brackets (k=[a,b] sets "a,b")."""
    configs: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _ITEM.match(text, pos)
        if match is None or match.end() == pos:
            raise ToolError(f"Invalid entity config: all configs to be added must be in the "
                            f"format \"key=val\": {text}")
        value = match.group(2).strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        configs[match.group(1)] = value
        pos = match.end()
    return configs
