"""`pybroker consumer-groups`: kafka-consumer-groups.sh — list, describe (with lag),
reset offsets, delete.

A Kafka client (confluent-kafka AdminClient + Consumer), so it works against
stock Kafka too; confluent-kafka must be installed (the `test` extra has it).
Describe prints Kafka's columns:
GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID.
Reset prints GROUP TOPIC PARTITION NEW-OFFSET and only changes anything with
--execute (the default is a dry run, as in Kafka); the group must be inactive."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from pybroker.tools._common import (
    ToolError,
    add_bootstrap,
    client_config,
    kafka_message,
    reach,
    read_properties,
    require_client,
)

COMMAND = "consumer-groups"
HELP = "list, describe, reset offsets of, or delete consumer groups (kafka-consumer-groups.sh)"

#: Kafka's --timeout default (ms): each admin call's wait, for an unreachable broker too
TIMEOUT_MS = 5000
DESCRIBE_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID")
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
INACTIVE_STATES = ("EMPTY", "DEAD", "UNKNOWN")
FIND_COORDINATOR = 10
OFFSET_DELETE = 47


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="List all consumer groups.")
    actions.add_argument("--describe", action="store_true",
                         help="Describe a group: offsets, lag and members.")
    actions.add_argument("--reset-offsets", action="store_true",
                         help="Reset a group's offsets (dry run unless --execute).")
    actions.add_argument("--delete", action="store_true", help="Delete a group.")
    actions.add_argument("--delete-offsets", action="store_true",
                         help="Delete the group's committed offsets of --topic T[:P,...].")
    parser.add_argument("--group", action="append", default=[], help="the consumer group")
    parser.add_argument("--members", action="store_true",
                        help="describe: the members (with --verbose their assignments)")
    parser.add_argument("--state", action="store_true",
                        help="describe: the group's coordinator, assignor, state and size")
    parser.add_argument("--offsets", action="store_true",
                        help="describe: offsets and lag per partition (the default)")
    # --verbose (describe --members / --state: more columns, as Kafka's) is every tool's
    # option (cli.py), which also shows the Kafka client's log lines on stderr
    parser.add_argument("--all-groups", action="store_true",
                        help="describe / delete / reset every group")
    parser.add_argument("--topic", action="append", default=[],
                        help="reset: topic, or topic:partition,partition")
    parser.add_argument("--all-topics", action="store_true",
                        help="reset: every topic the group has offsets for")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    target.add_argument("--shift-by", type=int, metavar="N",
                        help="move each committed offset by N (negative: back)")
    target.add_argument("--to-current", action="store_true",
                        help="the committed offsets (the log end where none)")
    target.add_argument("--by-duration", metavar="PnDTnHnMnS",
                        help="the first offset of records at most this long ago")
    target.add_argument("--from-file", metavar="CSV",
                        help="the offsets of a CSV file (topic,partition,offset lines, as "
                             "--export writes)")
    target.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                        help="first offset at/after this time (UTC unless an offset is given)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--export", action="store_true",
                        help="reset-offsets: print the new offsets as CSV (for --from-file)")
    parser.add_argument("--timeout", type=int, default=TIMEOUT_MS, metavar="MS",
                        help=f"how long each request may wait, in ms (default {TIMEOUT_MS})")
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of configs for the admin client and consumer")


def run(args: argparse.Namespace) -> int:
    try:
        require_client()
        tool = GroupTool(client_config(args.bootstrap_server,
                                       read_properties(args.command_config),
                                       timeout_ms=args.timeout))
        if args.list:
            if args.state:  # Kafka's --list --state: a GROUP STATE table
                print_table(tool.list_groups_with_state(), ("GROUP", "STATE"))
                return 0
            for group in tool.list_groups():
                print(group)
            return 0
        groups = tool.list_groups() if args.all_groups else args.group
        if not groups:
            raise ToolError("Option --group (or --all-groups) is required.")
        if args.describe:
            if args.members or args.state:
                if args.members and args.state:
                    raise ToolError("Option --describe takes one of these options: --members, "
                                    "--offsets, --state.")
                for group in groups:
                    columns, rows = tool.describe_view(group, "members" if args.members
                                                       else "state", args.verbose)
                    print_table(rows, columns)
                return 0
            for group in groups:
                print_table(tool.describe(group), DESCRIBE_COLUMNS)
            return 0
        if args.delete:
            failed = False
            for group, error in tool.delete(groups):
                if error is None:
                    print(f"Deletion of requested consumer groups ('{group}') was successful.")
                else:
                    failed = True
                    print(f"Deletion of some consumer groups failed:\n* Group '{group}' "
                          f"could not be deleted due to: {error}")
            return 1 if failed else 0
        if args.delete_offsets:
            return delete_offsets(tool, args, groups)
        return reset(tool, args, groups)
    except ToolError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `| head` closed stdout: the CLI ends quietly
        raise
    except Exception as exc:  # a KafkaException from the client
        print(f"Error: Executing consumer group command failed due to {kafka_message(exc)}",
              file=sys.stderr)
        return 1


def delete_offsets(tool: GroupTool, args: argparse.Namespace, groups: list[str]) -> int:
    if len(groups) != 1 or not args.topic:
        raise ToolError("Option --delete-offsets takes one --group and at least one --topic.")
    results = tool.delete_offsets(groups[0], args.topic)
    width = max([15] + [len(t) for (t, _), _ in results])
    print(f"\n{'TOPIC':<{width}} {'PARTITION':<10} STATUS")
    for (topic, partition), error in results:
        status = "Successful" if error is None else f"Error: {error}"
        print(f"{topic:<{width}} {partition:<10} {status:<15}".rstrip())
    return 1 if any(error for _, error in results) else 0


def reset(tool: GroupTool, args: argparse.Namespace, groups: list[str]) -> int:
    if not (args.topic or args.all_topics or args.from_file):  # a file names its own
        raise ToolError("One of the reset scopes should be defined: --all-topics, --topic.")
    if args.to_earliest:
        spec: tuple[str, Any] = ("earliest", None)
    elif args.to_latest:
        spec = ("latest", None)
    elif args.to_offset is not None:
        spec = ("offset", args.to_offset)
    elif args.to_datetime is not None:
        spec = ("datetime", parse_datetime(args.to_datetime))
    elif args.shift_by is not None:
        spec = ("shift", args.shift_by)
    elif args.to_current:
        spec = ("current", None)
    elif args.by_duration is not None:
        spec = ("datetime", int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
                - parse_duration(args.by_duration))
    elif args.from_file is not None:
        spec = ("file", read_offsets_csv(args.from_file))
    else:
        raise ToolError("Option --reset-offsets needs a reset specification "
                        "(--to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by, "
                        "--to-current, --by-duration, --from-file).")
    if not args.execute and not args.dry_run:
        # as Kafka: only when neither mode was chosen, and on stderr (stdout is the table)
        print("WARN: No action will be performed as the --execute option is missing. "
              "In a future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. "
              "You should add the --dry-run option explicitly if you are scripting this "
              "command and want to keep the current default behavior without prompting.",
              file=sys.stderr)
    for group in groups:
        rows = tool.reset(group, args.topic, args.all_topics, spec, execute=args.execute)
        if args.export:  # Kafka's CSV: topic,partition,offset (the group first for several)
            for g, topic, partition, offset in rows:
                print(",".join(map(str, ((g,) if len(groups) > 1 else ()) +
                                   (topic, partition, offset))))
        else:
            print_table(rows, RESET_COLUMNS)
    return 0


def parse_duration(text: str) -> int:
    """An ISO-8601 duration as --by-duration takes it (PnDTnHnMnS) -> milliseconds."""
    import re

    found = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?",
                         text.strip().upper())
    if not found or text.strip().upper() in ("P", "PT"):
        raise ToolError(f"Error parsing duration {text!r}: use PnDTnHnMnS, e.g. PT15M")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in found.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def read_offsets_csv(path: str) -> dict[tuple[str, int], int]:
    """topic,partition,offset lines (group,topic,partition,offset too, as --export writes
    them for several groups: the group column is then ignored)."""
    try:
        lines = [line.strip() for line in open(path).read().splitlines() if line.strip()]
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from None
    offsets = {}
    for number, line in enumerate(lines, 1):
        cells = line.split(",")
        try:
            topic, partition, offset = cells[-3], int(cells[-2]), int(cells[-1])
        except (IndexError, ValueError):
            raise ToolError(f"{path} line {number}: expected topic,partition,offset, got "
                            f"{line!r}") from None
        offsets[(topic, partition)] = offset
    return offsets


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime formats -> epoch ms (UTC when no zone is given)."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise ToolError(f"Error parsing timestamp {text!r}: use YYYY-MM-DDTHH:mm:SS.sss") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return int(parsed.timestamp() * 1000)


def print_table(rows: list[tuple[Any, ...]], columns: tuple[str, ...]) -> None:
    cells = [columns] + [tuple("-" if v is None else str(v) for v in row) for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    print()
    for row in cells:
        print(" ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


class GroupTool:
    def __init__(self, config: dict[str, Any]) -> None:
        from confluent_kafka.admin import AdminClient

        self.config = config
        self.reach = reach(config)
        self.timeout = self.reach.timeout_s
        self.admin = AdminClient(config)
        self.reach.connect(self.admin)

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer({**self.config, "group.id": "pybroker-consumer-groups-tool",
                         "enable.auto.commit": False})

    def list_groups(self) -> list[str]:
        result = self.reach.call(
            lambda: self.admin.list_consumer_groups(request_timeout=self.timeout),
            "listing groups")
        if result.errors:
            raise ToolError(str(result.errors[0]))
        return sorted(g.group_id for g in result.valid)

    def list_groups_with_state(self) -> list[tuple[str, str]]:
        result = self.reach.call(
            lambda: self.admin.list_consumer_groups(request_timeout=self.timeout),
            "listing groups")
        if result.errors:
            raise ToolError(str(result.errors[0]))
        return sorted((g.group_id, state_name(g.state).title().replace("_", ""))
                      for g in result.valid)

    def delete_offsets(self, group: str, topics: list[str]
                       ) -> list[tuple[tuple[str, int], str | None]]:
        """OffsetDelete to the group's coordinator (confluent-kafka has no call for it):
        each partition's outcome, None for success."""
        from pybroker.errors import ErrorCode
        from pybroker.tools._retry import check, retrying
        from pybroker.tools._wire import WireClient, error_text

        scope = self._reset_scope(group, topics, False)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in scope:
            by_topic.setdefault(topic, []).append(partition)
        what = f"deleting offsets of group {group}"
        with WireClient(self.config["bootstrap.servers"], int(self.timeout * 1000)) as wire:

            def attempt() -> dict[str, Any]:  # the coordinator may still be loading
                found = check(wire.request(FIND_COORDINATOR, {"key": group, "key_type": 0},
                                           max_version=2), what)
                if found["error_code"]:
                    return found
                return check(wire.request(OFFSET_DELETE, {"group_id": group, "topics": [
                    {"name": t, "partitions": [{"partition_index": p} for p in parts]}
                    for t, parts in by_topic.items()]}, node=found["node_id"]), what)

            answer = retrying(attempt, self.timeout, what)
        if answer["error_code"]:
            raise ToolError(f"{what} failed: {ErrorCode(answer['error_code']).name}")
        return sorted(((t["name"], p["partition_index"]),
                       error_text(p["error_code"]) if p["error_code"] else None)
                      for t in answer["topics"] for p in t["partitions"])

    def _description(self, group: str) -> Any:
        try:
            return self.reach.call(lambda: self.admin.describe_consumer_groups(
                [group], request_timeout=self.timeout)[group], f"describing group {group}")
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(f"describing group {group} failed: {kafka_message(exc)}") from exc

    def _committed(self, group: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        result = self.reach.call(lambda: self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout)[group],
            f"fetching the offsets of group {group}")
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or []
                if tp.offset >= 0}

    def describe(self, group: str) -> list[tuple[Any, ...]]:
        description = self._description(group)
        state = state_name(description.state)
        if state == "DEAD":
            raise ToolError(f"Consumer group '{group}' does not exist.")
        committed = self._committed(group)
        owners: dict[tuple[str, int], Any] = {}
        for member in description.members:
            assignment = member.assignment.topic_partitions if member.assignment else []
            for tp in assignment:
                owners[(tp.topic, tp.partition)] = member
        keys = sorted(set(committed) | set(owners))
        consumer = self._consumer()
        rows: list[tuple[Any, ...]] = []
        try:
            for topic, partition in keys:
                end = self._log_end(consumer, topic, partition)
                current = committed.get((topic, partition))
                lag = end - current if end is not None and current is not None else None
                member = owners.get((topic, partition))
                rows.append((group, topic, partition, current, end, lag,
                             member.member_id if member else None,
                             member.host if member else None,
                             member.client_id if member else None))
        finally:
            consumer.close()
        for member in description.members:  # members with nothing assigned
            if not (member.assignment and member.assignment.topic_partitions):
                rows.append((group, None, None, None, None, None, member.member_id,
                             member.host, member.client_id))
        if state == "EMPTY" or not description.members:
            print(f"\nConsumer group '{group}' has no active members.")
        return rows

    def describe_view(self, group: str, view: str, verbose: bool
                      ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        """--members or --state: one group's members or summary (group_views.py)."""
        from pybroker.tools import _group_views as group_views

        description = self._description(group)
        state = state_name(description.state)
        if state == "DEAD":
            raise ToolError(f"Consumer group '{group}' does not exist.")
        consumer = state_name(getattr(description, "type", "")) == "CONSUMER"
        raw = None
        if consumer and description.coordinator is not None:
            raw = group_views.describe_raw(description.coordinator.host,
                                           description.coordinator.port, group, self.timeout)
        shown = raw["group_state"] if raw else state.title()
        if view == "members":
            if not description.members:
                print(f"\nConsumer group '{group}' has no active members.")
            return group_views.member_rows(group, description, raw, consumer=consumer,
                                           verbose=verbose)
        return group_views.state_row(group, description, raw, shown, consumer=consumer,
                                     verbose=verbose)

    def delete(self, groups: list[str]) -> list[tuple[str, str | None]]:
        results: list[tuple[str, str | None]] = []
        for group in groups:
            try:
                self.reach.call(lambda group=group: self.admin.delete_consumer_groups(
                    [group], request_timeout=self.timeout)[group], f"deleting group {group}")
                results.append((group, None))
            except ToolError:
                raise
            except Exception as exc:
                results.append((group, kafka_message(exc)))
        return results

    def _log_end(self, consumer: Any, topic: str, partition: int) -> int | None:
        from confluent_kafka import TopicPartition

        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                     timeout=self.timeout)
            return int(high)
        except Exception:
            return None

    def reset(self, group: str, topics: list[str], all_topics: bool, spec: tuple[str, Any],
              *, execute: bool) -> list[tuple[Any, ...]]:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        description = self._description(group)
        state = state_name(description.state)
        if execute and state not in INACTIVE_STATES:
            raise ToolError(f"Assignments can only be reset if the group '{group}' is inactive, "
                            f"but the current state is {state.title()}.")
        kind, value = spec
        targets = (sorted(value) if kind == "file" and not (topics or all_topics)
                   else self._reset_scope(group, topics, all_topics))
        committed = self._committed(group) if kind in ("shift", "current") else {}
        consumer = self._consumer()
        try:
            new: dict[tuple[str, int], int] = {}
            if kind == "datetime":
                found = consumer.offsets_for_times(
                    [TopicPartition(t, p, value) for t, p in targets], timeout=self.timeout)
                for tp in found:
                    new[(tp.topic, tp.partition)] = tp.offset
            for topic, partition in targets:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                           timeout=self.timeout)
                if kind == "earliest":
                    new[(topic, partition)] = low
                elif kind == "latest":
                    new[(topic, partition)] = high
                elif kind == "offset":
                    new[(topic, partition)] = min(max(value, low), high)
                elif kind == "file":
                    if (topic, partition) not in value:
                        raise ToolError(f"{topic}-{partition} is not in the --from-file plan")
                    new[(topic, partition)] = min(max(value[(topic, partition)], low), high)
                elif kind == "shift":
                    if (topic, partition) not in committed:
                        raise ToolError(f"Cannot shift offset for partition {topic}-{partition} "
                                        "since there is no current committed offset")
                    new[(topic, partition)] = min(max(committed[(topic, partition)] + value,
                                                      low), high)
                elif kind == "current":
                    new[(topic, partition)] = committed.get((topic, partition), high)
                elif new.get((topic, partition), -1) < 0:
                    new[(topic, partition)] = high
        finally:
            consumer.close()
        if execute:
            request = ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, o) for (t, p), o in sorted(new.items())])
            result = self.reach.call(lambda: self.admin.alter_consumer_group_offsets(
                [request], request_timeout=self.timeout)[group],
                f"resetting the offsets of group {group}")
            errors = [tp for tp in result.topic_partitions if tp.error]
            if errors:
                raise ToolError(f"resetting {errors[0].topic}-{errors[0].partition} failed: "
                                f"{errors[0].error}")
        return [(group, t, p, o) for (t, p), o in sorted(new.items())]

    def _reset_scope(self, group: str, topics: list[str], all_topics: bool
                     ) -> list[tuple[str, int]]:
        if all_topics:
            return sorted(self._committed(group))
        metadata = self.admin.list_topics(timeout=self.timeout)
        scope: list[tuple[str, int]] = []
        for item in topics:
            name, _, parts = item.partition(":")
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None:
                raise ToolError(f"Topic '{name}' does not exist.")
            if parts:
                scope += [(name, int(p)) for p in parts.split(",") if p]
            else:
                scope += [(name, p) for p in sorted(topic.partitions)]
        return scope


def state_name(state: Any) -> str:
    """ConsumerGroupState enum (or string) -> its upper-case name."""
    name = getattr(state, "name", None) or str(state)
    return name.rsplit(".", 1)[-1].upper()
