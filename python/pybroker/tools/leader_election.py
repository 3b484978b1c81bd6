"""`pybroker leader-election`: kafka-leader-election.sh — elect the preferred (or,
for offline partitions, any live) replica as leader, with ElectLeaders sent to
the controller. Output as Kafka's LeaderElectionCommand: `Successfully completed
leader election (PREFERRED) for partitions t-0, t-1`, `Valid replica already
elected for partitions t-2`, and per failure `Error completing leader election
(PREFERRED) for partition: t-0: <exception>` (exit status 1)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pybroker.errors import ErrorCode
from pybroker.tools._common import ToolError, add_bootstrap
from pybroker.tools._raw_admin import RawAdmin

COMMAND = "leader-election"
HELP = "elect preferred or unclean partition leaders (kafka-leader-election.sh)"

ELECT_LEADERS = 43
ELECT_LEADERS_VERSION = 2
ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
WAIT_S = 30.0

Partition = tuple[str, int]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--admin.config", dest="admin_config", metavar="FILE",
                        help="(accepted for compatibility)")
    parser.add_argument("--election-type", required=True, type=str.upper,
                        choices=sorted(ELECTION_TYPES), help="PREFERRED or UNCLEAN")
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", help="the topic (with --partition)")
    scope.add_argument("--all-topic-partitions", action="store_true",
                       help="every partition of every topic")
    scope.add_argument("--path-to-json-file", metavar="FILE",
                       help='{"partitions":[{"topic":"t","partition":0}]}')
    parser.add_argument("--partition", type=int, help="the partition of --topic")


def run(args: argparse.Namespace) -> int:
    try:
        partitions = _partitions(args)
        return elect(RawAdmin(args.bootstrap_server, WAIT_S), args.election_type, partitions)
    except ToolError as exc:
        print(f"Error: {exc}")
        return 1


def _partitions(args: argparse.Namespace) -> list[Partition] | None:
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        if args.partition is None:
            raise ToolError("Missing required option(s) [partition]")
        return [(args.topic, args.partition)]
    try:
        data = json.loads(Path(args.path_to_json_file).read_text())
        out = [(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"{args.path_to_json_file}: {exc!r}") from exc
    if len(set(out)) != len(out):
        raise ToolError("Replica election data contains duplicate partitions")
    return out


def exception_name(code: ErrorCode) -> str:
    """The Java client's exception class for an error code, as Kafka's tool prints it."""
    camel = "".join(w.capitalize() for w in code.name.split("_"))
    if not camel.endswith("Exception"):
        camel += "Exception"
    return f"org.apache.kafka.common.errors.{camel}"


def elect(admin: RawAdmin, election_type: str, partitions: list[Partition] | None) -> int:
    topics: dict[str, list[int]] = {}
    for topic, index in partitions or []:
        topics.setdefault(topic, []).append(index)
    body: dict[str, Any] = {
        "election_type": ELECTION_TYPES[election_type],
        "topic_partitions": None if partitions is None else [
            {"topic": t, "partitions": ps} for t, ps in topics.items()],
        "timeout_ms": int(WAIT_S * 1000)}
    response = admin.controller_request(ELECT_LEADERS, ELECT_LEADERS_VERSION, body)
    if response["error_code"]:
        raise ToolError(exception_name(ErrorCode(response["error_code"])))
    succeeded, noop, failed = [], [], []
    for topic in response["replica_election_results"]:
        for p in topic["partition_result"]:
            name = f"{topic['topic']}-{p['partition_id']}"
            code = ErrorCode(p["error_code"])
            if code == ErrorCode.NONE:
                succeeded.append(name)
            elif code == ErrorCode.ELECTION_NOT_NEEDED:
                noop.append(name)
            else:
                failed.append((name, f"{exception_name(code)}: {p['error_message'] or ''}"))
    if succeeded:
        print(f"Successfully completed leader election ({election_type}) for partitions "
              f"{', '.join(succeeded)}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    for name, error in failed:
        print(f"Error completing leader election ({election_type}) for partition: "
              f"{name}: {error}")
    if failed:
        print(f"Error: {len(failed)} replica(s) could not be elected")
        return 1
    return 0
