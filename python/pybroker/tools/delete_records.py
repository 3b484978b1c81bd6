"""`pybroker delete-records`: kafka-delete-records.sh.

    pybroker delete-records --bootstrap-server B --offset-json-file offsets.json

with Kafka's file: {"partitions": [{"topic": "t", "partition": 0, "offset": 10}],
"version": 1} (offset -1: up to the high watermark). Records below each offset are
deleted (DeleteRecords to each partition's leader: the log start offset moves), and
Kafka's lines are printed:

    Executing records delete operation
    Records delete operation completed:
    partition: t-0	low_watermark: 10

or `partition: t-0	error: <error>` for a partition that failed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pybroker.tools._common import DEFAULT_TIMEOUT_MS, ToolError, add_bootstrap, read_properties
from pybroker.tools._retry import settle
from pybroker.tools._wire import WireClient, error_text

COMMAND = "delete-records"
HELP = "delete records below given offsets (kafka-delete-records.sh)"

DELETE_RECORDS = 21
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of client configs")
    parser.add_argument("--offset-json-file", required=True, metavar="FILE",
                        help='{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], '
                             '"version": 1}')


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    try:
        document = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ToolError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(document, dict) or document.get("version", 1) != 1:
        raise ToolError(f"Not supported version field value {document.get('version')!r}"
                        if isinstance(document, dict) else f"{path}: expected a JSON object")
    offsets: dict[tuple[str, int], int] = {}
    for item in document.get("partitions") or []:
        try:
            key = (str(item["topic"]), int(item["partition"]))
            offset = int(item["offset"])
        except (KeyError, TypeError, ValueError):
            raise ToolError(f"malformed partition entry {item!r}: needs topic, partition and "
                            "offset") from None
        if key in offsets:
            raise ToolError(f"Offset json file contains duplicate topic partitions: "
                            f"{key[0]}-{key[1]}")
        offsets[key] = offset
    if not offsets:
        raise ToolError(f"{path} names no partitions")
    return offsets


def run(args: argparse.Namespace) -> int:
    try:
        offsets = read_offsets(args.offset_json_file)
        props = read_properties(args.command_config)
        timeout_ms = int(props.get("default.api.timeout.ms", DEFAULT_TIMEOUT_MS))
        print("Executing records delete operation")
        with WireClient(args.bootstrap_server, timeout_ms) as client:
            results = settle(lambda: delete(client, offsets, timeout_ms),
                             lambda found: (code for code, _low in found.values()),
                             timeout_ms / 1000, "deleting records")
        print("Records delete operation completed:")
        for (topic, partition), (code, low) in sorted(results.items()):
            if code:
                print(f"partition: {topic}-{partition}\terror: {error_text(code)}")
            else:
                print(f"partition: {topic}-{partition}\tlow_watermark: {low}")
        return 0
    except BrokenPipeError:  # `| head` closed stdout: the CLI ends quietly
        raise
    except (ToolError, OSError) as exc:
        print(f"Error occurred: {exc}", file=sys.stderr)
        return 1


def delete(client: WireClient, offsets: dict[tuple[str, int], int],
           timeout_ms: int) -> dict[tuple[str, int], tuple[int, int]]:
    """DeleteRecords to each leader: (topic, partition) -> (error code, low watermark)."""
    leaders = client.leaders(sorted({t for t, _ in offsets}))
    results: dict[tuple[str, int], tuple[int, int]] = {}
    by_leader: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for (topic, partition), offset in offsets.items():
        leader = leaders.get((topic, partition))
        if leader is None:
            results[(topic, partition)] = (UNKNOWN_TOPIC_OR_PARTITION, -1)
        elif leader < 0:
            results[(topic, partition)] = (LEADER_NOT_AVAILABLE, -1)
        else:
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(
                {"partition_index": partition, "offset": offset})
    for leader, topics in by_leader.items():
        answer = client.request(DELETE_RECORDS, {
            "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
            "timeout_ms": timeout_ms}, node=leader)
        for topic in answer["topics"]:
            for p in topic["partitions"]:
                results[(topic["name"], p["partition_index"])] = (p["error_code"],
                                                                 p["low_watermark"])
    return results
