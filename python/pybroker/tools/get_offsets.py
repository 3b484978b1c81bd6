"""`pybroker get-offsets`: kafka-get-offsets.sh (Kafka's GetOffsetShell).

    pybroker get-offsets --bootstrap-server B --topic 'orders.*' [--partitions 0,1] \\
        [--time -1|-2|latest|earliest|<epoch ms>]

Prints `topic:partition:offset` per partition, sorted by topic then partition:
the latest offset (the high watermark, the default), the earliest (log start) or
the first offset whose timestamp is at or after the given one. Partitions with no
such offset are left out, and a partition whose leader answers with an error is
skipped with a line on stderr, as GetOffsetShell does. `--topic` is a regular
expression (full match); internal topics are included unless
--exclude-internal-topics."""

from __future__ import annotations

import argparse
import re
import sys

from pybroker.admin.internal_topics import INTERNAL_TOPICS
from pybroker.errors import ErrorCode
from pybroker.tools._common import DEFAULT_TIMEOUT_MS, ToolError, add_bootstrap, read_properties
from pybroker.tools._retry import settle
from pybroker.tools._wire import WireClient, error_text

COMMAND = "get-offsets"
HELP = "print partitions' earliest, latest or by-time offsets (kafka-get-offsets.sh)"

LIST_OFFSETS = 2
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
TIME_NAMES = {"latest": LATEST, "earliest": EARLIEST, "max-timestamp": MAX_TIMESTAMP}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of client configs")
    parser.add_argument("--topic", help="topics to get offsets of (a regular expression; "
                                        "default all)")
    parser.add_argument("--partitions", metavar="0,1",
                        help="partition ids (default all)")
    parser.add_argument("--time", default="-1",
                        help="-1 or latest, -2 or earliest, or a timestamp in ms")
    parser.add_argument("--exclude-internal-topics", action="store_true",
                        help="leave out internal topics")


def parse_time(text: str) -> int:
    value = TIME_NAMES.get(text.strip().lower())
    if value is None:
        try:
            value = int(text)
        except ValueError:
            raise ToolError(f"Malformed time argument {text}. Please use -1 or latest / -2 or "
                            "earliest / -3 or max-timestamp, or a specified long format "
                            "timestamp") from None
    if value == MAX_TIMESTAMP:
        raise ToolError("--time -3 (max-timestamp) needs ListOffsets v7, which pybroker's "
                        "brokers do not serve yet")
    return value


def run(args: argparse.Namespace) -> int:
    try:
        timestamp = parse_time(args.time)
        props = read_properties(args.command_config)
        timeout_ms = int(props.get("default.api.timeout.ms", DEFAULT_TIMEOUT_MS))
        wanted_partitions = None
        if args.partitions:
            try:
                wanted_partitions = {int(p) for p in args.partitions.split(",") if p.strip()}
            except ValueError:
                raise ToolError(f"invalid --partitions {args.partitions}") from None
        regex = re.compile(args.topic) if args.topic else None
        with WireClient(args.bootstrap_server, timeout_ms) as client:
            wanted = {
                tp: leader for tp, leader in client.leaders().items()
                if (regex is None or regex.fullmatch(tp[0]))
                and (wanted_partitions is None or tp[1] in wanted_partitions)
                and not (args.exclude_internal_topics and tp[0] in INTERNAL_TOPICS)}
            if args.topic and not wanted:
                raise ToolError("Could not match any topic-partitions with the specified "
                                "filters")
            offsets, errors = settle(lambda: list_offsets(client, list(wanted), timestamp),
                                     lambda outcome: outcome[1].values(), timeout_ms / 1000,
                                     "listing offsets")
        for (topic, partition), code in sorted(errors.items()):
            print(f"Skip getting offsets for topic-partition {topic}:{partition} due to "
                  f"error: {error_text(code)}", file=sys.stderr)
        for (topic, partition), offset in sorted(offsets.items()):
            print(f"{topic}:{partition}:{offset}")
        return 0
    except BrokenPipeError:  # `| head` closed stdout: the CLI ends quietly
        raise
    except (ToolError, OSError, re.error) as exc:
        print(f"Error occurred: {exc}", file=sys.stderr)
        return 1


def list_offsets(client: WireClient, partitions: list[tuple[str, int]], timestamp: int
                 ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """ListOffsets to each partition's leader, as Metadata names it now (asked again on
    every attempt: a leader may have moved): the offsets found, and each failed
    partition's error code."""
    current = client.leaders(sorted({t for t, _ in partitions}))
    leaders = {tp: current.get(tp, -1) for tp in partitions}
    by_leader: dict[int, dict[str, list[int]]] = {}
    errors: dict[tuple[str, int], int] = {}
    for (topic, partition), leader in leaders.items():
        if leader < 0:
            errors[(topic, partition)] = ErrorCode.LEADER_NOT_AVAILABLE
            continue
        by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
    found: dict[tuple[str, int], int] = {}
    for leader, topics in by_leader.items():
        answer = client.request(LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                for p in parts]} for t, parts in topics.items()],
        }, node=leader)
        for topic in answer["topics"]:
            for p in topic["partitions"]:
                if p["error_code"]:
                    errors[(topic["name"], p["partition_index"])] = p["error_code"]
                elif p["offset"] >= 0:
                    found[(topic["name"], p["partition_index"])] = p["offset"]
    return found, errors
