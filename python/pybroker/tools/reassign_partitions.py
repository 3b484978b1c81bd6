"""`pybroker reassign-partitions`: kafka-reassign-partitions.sh — generate, execute,
verify and cancel partition moves (KIP-455's AlterPartitionReassignments and
ListPartitionReassignments, sent to the controller).

Files and output follow Kafka's ReassignPartitionsCommand: the topics file is
`{"version":1,"topics":[{"topic":"t"}]}`, the reassignment file
`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],
"log_dirs":["any","any"]}]}`; --execute prints the current assignment (to save
for a rollback) and `Successfully started partition reassignments for t-0,t-1`;
--verify prints `Reassignment of partition t-0 is completed.` or `... is still
in progress.` per partition and, once all are done, clears the throttles
--execute --throttle set, as Kafka's does."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pybroker.controller.assignment import assign_replicas
from pybroker.errors import ErrorCode
from pybroker.tools._common import (
    ToolError,
    add_bootstrap,
    client_config,
    kafka_message,
    read_properties,
    require_client,
)
from pybroker.tools._raw_admin import ClusterView, RawAdmin

COMMAND = "reassign-partitions"
HELP = "move partitions between brokers (kafka-reassign-partitions.sh)"

ALTER_REASSIGNMENTS = 45
LIST_REASSIGNMENTS = 46
#: topic configs naming the replicas a throttle applies to (Kafka's names)
LEADER_THROTTLED = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED = "follower.replication.throttled.replicas"
#: broker configs holding the throttle rates
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
WAIT_S = 30.0

Partition = tuple[str, int]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of AdminClient configs")
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true",
                         help="propose an assignment of the topics over --broker-list")
    actions.add_argument("--execute", action="store_true",
                         help="start the reassignment in --reassignment-json-file")
    actions.add_argument("--verify", action="store_true",
                         help="report whether the reassignment completed; clear throttles")
    actions.add_argument("--cancel", action="store_true",
                         help="cancel the reassignment in --reassignment-json-file")
    actions.add_argument("--list", action="store_true",
                         help="list the reassignments in progress")
    parser.add_argument("--topics-to-move-json-file", metavar="FILE",
                        help='{"version":1,"topics":[{"topic":"t"}]} (--generate)')
    parser.add_argument("--broker-list", metavar="1,2,3",
                        help="brokers to spread the partitions over (--generate)")
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help="the reassignment (--execute, --verify, --cancel)")
    parser.add_argument("--throttle", type=int, default=-1, metavar="B/s",
                        help="replication throttle for the move, bytes/s (--execute)")
    parser.add_argument("--preserve-throttles", action="store_true",
                        help="--verify, --cancel: leave the throttles in place")
    parser.add_argument("--additional", action="store_true",
                        help="--execute while other reassignments are in progress")
    parser.add_argument("--disable-rack-aware", action="store_true",
                        help="(accepted for compatibility)")
    parser.add_argument("--timeout", type=int, default=10000, metavar="MS",
                        help="(accepted for compatibility)")


def run(args: argparse.Namespace) -> int:
    try:
        admin = RawAdmin(args.bootstrap_server, WAIT_S)
        if args.generate:
            generate(admin, args)
        elif args.execute:
            execute(admin, args)
        elif args.verify:
            verify(admin, args)
        elif args.cancel:
            cancel(admin, args)
        else:
            list_moves(admin)
        return 0
    except ToolError as exc:
        print(f"Error: {exc}")
        return 1


# --- JSON files ------------------------------------------------------------------------
def _load(path: str | None, option: str) -> Any:
    if not path:
        raise ToolError(f"Missing required argument \"[{option}]\"")
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ToolError(f"{path}: {exc}") from exc


def parse_reassignment(data: Any) -> dict[Partition, list[int]]:
    """The reassignment file's partitions -> target replicas (Kafka's checks: no
    duplicate partition, no duplicate replica, a non-empty replica list)."""
    try:
        entries = data["partitions"]
        out: dict[Partition, list[int]] = {}
        for entry in entries:
            key = (str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
            if key in out:
                raise ToolError(f"Duplicate reassignment of partition {key[0]}-{key[1]}")
            if not replicas or len(set(replicas)) != len(replicas):
                raise ToolError(f"Partition replica list cannot be empty or contain "
                                f"duplicates: {key[0]}-{key[1]} {replicas}")
            out[key] = replicas
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(f"the reassignment JSON is not in Kafka's format: {exc!r}") from exc
    if not out:
        raise ToolError("Partition reassignment list cannot be empty")
    return out


def format_reassignment(assignment: dict[Partition, list[int]]) -> str:
    """Kafka's reassignment JSON, compact, partitions in topic/partition order."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _names(partitions: list[Partition]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(partitions))


def _current(view: ClusterView, partitions: list[Partition]) -> dict[Partition, list[int]]:
    out = {}
    for topic, index in partitions:
        found = view.topics.get(topic, {}).get(index)
        if found is None:
            raise ToolError(f"Unable to find partition: {topic}-{index}")
        out[(topic, index)] = found[1]
    return out


# --- actions ---------------------------------------------------------------------------
def generate(admin: RawAdmin, args: argparse.Namespace) -> None:
    data = _load(args.topics_to_move_json_file, "topics-to-move-json-file")
    if not args.broker_list:
        raise ToolError("Missing required argument \"[broker-list]\"")
    try:
        topics = [str(t["topic"]) for t in data["topics"]]
        brokers = [int(b) for b in args.broker_list.split(",")]
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(f"bad --topics-to-move-json-file or --broker-list: {exc!r}") from exc
    if len(set(brokers)) != len(brokers):
        raise ToolError(f"Duplicate broker list entries in {args.broker_list}")
    view = admin.metadata()
    unknown = [b for b in brokers if b not in view.brokers]
    if unknown:
        raise ToolError(f"The given broker list contains unknown brokers: "
                        f"{','.join(map(str, unknown))}")
    current: dict[Partition, list[int]] = {}
    proposed: dict[Partition, list[int]] = {}
    for topic in topics:
        partitions = view.topics.get(topic)
        if partitions is None:
            raise ToolError(f"Topic {topic} not found")
        for index, (_, replicas, _) in partitions.items():
            current[(topic, index)] = replicas
        factor = len(next(iter(partitions.values()))[1])
        try:
            lists = assign_replicas(len(partitions), factor, brokers)
        except Exception as exc:  # KafkaError(INVALID_REPLICATION_FACTOR)
            raise ToolError(str(exc)) from exc
        for index, replicas in enumerate(lists):
            proposed[(topic, index)] = replicas
    print(f"Current partition replica assignment\n{format_reassignment(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment(proposed)}")


def execute(admin: RawAdmin, args: argparse.Namespace) -> None:
    target = parse_reassignment(_load(args.reassignment_json_file, "reassignment-json-file"))
    if not args.additional and ongoing(admin):
        raise ToolError("Cannot execute because there is an existing partition assignment.  "
                        "Use --additional to override this and create a new partition "
                        "assignment in addition to the existing one. The --additional flag "
                        "can also be used to change the throttle by resubmitting the current "
                        "reassignment.")
    view = admin.metadata()
    current = _current(view, list(target))
    unknown = sorted({b for r in target.values() for b in r if b not in view.brokers})
    if unknown:
        raise ToolError(f"Unknown broker id(s) {','.join(map(str, unknown))}")
    print("Current partition replica assignment\n")
    print(format_reassignment(current))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0:
        set_throttles(args, current, target)
        print("Warning: You must run --verify periodically, until the reassignment "
              "completes, to ensure the throttle is removed.")
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    errors = alter(admin, {k: v for k, v in target.items()})
    if errors:
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(
            f"{t}-{p}: {message}" for (t, p), message in sorted(errors.items())))
    plural = "" if len(target) == 1 else "s"
    print(f"Successfully started partition reassignment{plural} for {_names(list(target))}")


def alter(admin: RawAdmin, moves: dict[Partition, list[int] | None]) -> dict[Partition, str]:
    """AlterPartitionReassignments; the partitions that failed, with their messages."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), replicas in sorted(moves.items()):
        topics.setdefault(topic, []).append({"partition_index": index, "replicas": replicas})
    response = admin.controller_request(ALTER_REASSIGNMENTS, 0, {
        "timeout_ms": int(WAIT_S * 1000),
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    if response["error_code"]:
        raise ToolError(response["error_message"] or ErrorCode(response["error_code"]).name)
    errors = {}
    for topic in response["responses"]:
        for p in topic["partitions"]:
            if p["error_code"]:
                code = ErrorCode(p["error_code"])
                errors[(topic["name"], p["partition_index"])] = (
                    f"{code.name}: {p['error_message'] or ''}".rstrip(": "))
    return errors


def ongoing(admin: RawAdmin) -> dict[Partition, tuple[list[int], list[int], list[int]]]:
    response = admin.controller_request(LIST_REASSIGNMENTS, 0, {
        "timeout_ms": int(WAIT_S * 1000), "topics": None})
    if response["error_code"]:
        raise ToolError(response["error_message"] or ErrorCode(response["error_code"]).name)
    return {(t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"],
                                               p["removing_replicas"])
            for t in response["topics"] for p in t["partitions"]}


def verify(admin: RawAdmin, args: argparse.Namespace) -> None:
    target = parse_reassignment(_load(args.reassignment_json_file, "reassignment-json-file"))
    moving = ongoing(admin)
    view = admin.metadata()
    print("Status of partition reassignment:")
    done = True
    for key in sorted(target):
        name = f"{key[0]}-{key[1]}"
        if key in moving:
            done = False
            print(f"Reassignment of partition {name} is still in progress.")
            continue
        replicas = view.topics.get(key[0], {}).get(key[1], (-1, [], []))[1]
        if replicas == target[key]:
            print(f"Reassignment of partition {name} is completed.")
        else:
            print(f"There is no active reassignment of partition {name}, but replica set is "
                  f"{','.join(map(str, replicas))} rather than "
                  f"{','.join(map(str, target[key]))}.")
    if done and not args.preserve_throttles:
        clear_throttles(args, view, sorted({t for t, _ in target}))


def cancel(admin: RawAdmin, args: argparse.Namespace) -> None:
    target = parse_reassignment(_load(args.reassignment_json_file, "reassignment-json-file"))
    moving = ongoing(admin)
    active = [k for k in target if k in moving]
    if active:
        errors = alter(admin, dict.fromkeys(active))
        if errors:
            raise ToolError("Error cancelling partition reassignment(s):\n" + "\n".join(
                f"{t}-{p}: {message}" for (t, p), message in sorted(errors.items())))
        plural = "" if len(active) == 1 else "s"
        print(f"Successfully cancelled partition reassignment{plural} for: {_names(active)}")
    else:
        print("None of the specified partition reassignments are active.")
    if not args.preserve_throttles:
        clear_throttles(args, admin.metadata(), sorted({t for t, _ in target}))


def list_moves(admin: RawAdmin) -> None:
    moving = ongoing(admin)
    if not moving:
        print("No partition reassignments found.")
        return
    print("Current partition reassignments:")
    for (topic, index), (replicas, adding, removing) in sorted(moving.items()):
        print(f"{topic}-{index}: replicas: {','.join(map(str, replicas))}. "
              f"adding: {','.join(map(str, adding))}. removing: {','.join(map(str, removing))}.")


# --- throttles (IncrementalAlterConfigs through confluent-kafka) ----------------------------
def _throttled(pairs: dict[Partition, list[int]], topic: str) -> str:
    return ",".join(f"{p}:{b}" for (t, p), brokers in sorted(pairs.items()) if t == topic
                    for b in brokers)


def set_throttles(args: argparse.Namespace, current: dict[Partition, list[int]],
                  target: dict[Partition, list[int]]) -> None:
    """Kafka's: the moving partitions' current replicas are leader-throttled, the
    new ones follower-throttled (topic configs), and every broker involved gets
    the rate (dynamic broker configs)."""
    ck = require_client()
    resources = []
    config_resource = ck.admin.ConfigResource
    entry = ck.admin.ConfigEntry
    op = ck.admin.AlterConfigOpType
    adding = {k: [b for b in target[k] if b not in current[k]] for k in target}
    for topic in sorted({t for t, _ in target}):
        resources.append(config_resource("TOPIC", topic, incremental_configs=[
            entry(LEADER_THROTTLED, _throttled(current, topic),
                  incremental_operation=op.SET),
            entry(FOLLOWER_THROTTLED, _throttled(adding, topic),
                  incremental_operation=op.SET)]))
    brokers = sorted({b for r in list(current.values()) + list(target.values()) for b in r})
    for broker in brokers:
        resources.append(config_resource("BROKER", str(broker), incremental_configs=[
            entry(LEADER_RATE, str(args.throttle), incremental_operation=op.SET),
            entry(FOLLOWER_RATE, str(args.throttle), incremental_operation=op.SET)]))
    _alter_configs(ck, args, resources)


def clear_throttles(args: argparse.Namespace, view: ClusterView, topics: list[str]) -> None:
    ck = require_client()
    config_resource = ck.admin.ConfigResource
    entry = ck.admin.ConfigEntry
    op = ck.admin.AlterConfigOpType
    brokers = sorted(view.brokers)
    resources = [config_resource("BROKER", str(b), incremental_configs=[
        entry(name, None, incremental_operation=op.DELETE)
        for name in (LEADER_RATE, FOLLOWER_RATE)]) for b in brokers]
    resources += [config_resource("TOPIC", t, incremental_configs=[
        entry(name, None, incremental_operation=op.DELETE)
        for name in (LEADER_THROTTLED, FOLLOWER_THROTTLED)]) for t in topics]
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          f"{','.join(map(str, brokers))}")
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} "
          f"{','.join(topics)}")
    _alter_configs(ck, args, resources, quiet=True)


def _alter_configs(ck: Any, args: argparse.Namespace, resources: list[Any],
                   quiet: bool = False) -> None:
    config = client_config(args.bootstrap_server, read_properties(args.command_config))
    client = ck.admin.AdminClient(config)
    # librdkafka takes one BROKER resource per call (each goes to its own broker)
    topics = [r for r in resources if r.restype != ck.admin.ResourceType.BROKER]
    calls = ([topics] if topics else []) + [[r] for r in resources if r not in topics]
    for call in calls:
        futures = client.incremental_alter_configs(call, request_timeout=WAIT_S)
        for resource, future in futures.items():
            try:
                future.result(WAIT_S)
            except Exception as exc:  # a broker without dynamic broker configs, say
                if not quiet:
                    print(f"Warning: setting {resource} failed: {kafka_message(exc)}")
