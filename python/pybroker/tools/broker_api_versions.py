"""`pybroker broker-api-versions`: Kafka's kafka-broker-api-versions.sh -- the API
versions each broker of the cluster advertises, and which this tool's client could use:

    pybroker broker-api-versions --bootstrap-server B

    127.0.0.1:9092 (id: 0 rack: null) -> (
        Produce(0): 0 to 12 [usable: 10],
        ...
    )

"usable" is the highest version both the broker and pybroker's own codec know; an API
the codec does not know is printed as UNKNOWN, as Kafka prints it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pybroker import protocol
from pybroker.tools._common import (
    DEFAULT_TIMEOUT_MS,
    ToolError,
    add_bootstrap,
    read_properties,
)
from pybroker.tools._wire import API_VERSIONS, METADATA, WireClient

COMMAND = "broker-api-versions"
HELP = "the API versions each broker supports (kafka-broker-api-versions.sh)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of client configs (default.api.timeout.ms)")


def run(args: argparse.Namespace) -> int:
    props = read_properties(args.command_config)
    timeout_ms = int(props.get("default.api.timeout.ms", DEFAULT_TIMEOUT_MS))
    try:
        with WireClient(args.bootstrap_server, timeout_ms) as client:
            brokers = client.request(METADATA, {"topics": [],
                                                "allow_auto_topic_creation": False})["brokers"]
            for broker in sorted(brokers, key=lambda b: b["node_id"]):
                answer = client.request(API_VERSIONS, {}, node=broker["node_id"],
                                        max_version=0)
                print(render(broker, answer["api_keys"]))
    except BrokenPipeError:  # `| head` closed stdout: the CLI ends quietly
        raise
    except (ToolError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0


def render(broker: dict[str, Any], versions: list[dict[str, int]]) -> str:
    rack = broker.get("rack") or "null"
    lines = [f"{broker['host']}:{broker['port']} (id: {broker['node_id']} rack: {rack}) -> ("]
    for i, api in enumerate(sorted(versions, key=lambda a: a["api_key"])):
        key, low, high = api["api_key"], api["min_version"], api["max_version"]
        ours = protocol.APIS.get(key)
        if ours is None:
            text = f"UNKNOWN({key}): {low} to {high}"
        elif ours.max_version < low:
            text = f"{ours.name}({key}): {low} to {high} [unusable: node too new]"
        elif ours.min_version > high:
            text = f"{ours.name}({key}): {low} to {high} [unusable: node too old]"
        else:
            text = f"{ours.name}({key}): {low} to {high} [usable: {min(high, ours.max_version)}]"
        lines.append("\t" + text + ("," if i < len(versions) - 1 else ""))
    lines.append(")")
    return "\n".join(lines)
