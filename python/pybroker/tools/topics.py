"""`pybroker topics`: kafka-topics.sh — create, list, describe, alter (partitions), delete.

An AdminClient tool, so it works against stock Kafka too. Output and messages
follow Kafka's TopicCommand: `Created topic T.`; describe prints a topic line
(`Topic: T<TAB>TopicId: ...<TAB>PartitionCount: N<TAB>ReplicationFactor: R<TAB>Configs: ...`)
then one tab-indented line per partition; errors print
`Error while executing topic command : <message>` and exit 1. `--topic` is a
regular expression (full match) except with --create."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from typing import Any

from pybroker.admin.internal_topics import INTERNAL_TOPICS
from pybroker.tools._common import (
    Reach,
    ToolError,
    add_bootstrap,
    client_config,
    kafka_message,
    parse_pairs,
    reach,
    read_properties,
    require_client,
)

COMMAND = "topics"
HELP = "create, list, describe, alter or delete topics (kafka-topics.sh)"



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of AdminClient configs "
                             "(default.api.timeout.ms: how long to wait, default 30000)")
    actions = parser.add_mutually_exclusive_group(required=True)
    for name, text in (("create", "Create a new topic."), ("list", "List all available topics."),
                       ("describe", "List details for the given topics."),
                       ("alter", "Alter the number of partitions."),
                       ("delete", "Delete a topic.")):
        actions.add_argument(f"--{name}", action="store_true", help=text)
    parser.add_argument("--topic", help="topic name; a regular expression except with --create")
    parser.add_argument("--partitions", type=int, help="number of partitions (create, alter)")
    parser.add_argument("--replication-factor", type=int, help="replication factor (create)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                        help="a topic config override (create)")
    parser.add_argument("--if-exists", action="store_true",
                        help="alter, describe, delete: only if the topic exists")
    parser.add_argument("--if-not-exists", action="store_true",
                        help="create: only if the topic does not exist")
    parser.add_argument("--exclude-internal", action="store_true",
                        help="leave internal topics out of list/describe")
    parser.add_argument("--under-replicated-partitions", action="store_true",
                        help="describe: only partitions whose ISR is smaller than replicas")
    parser.add_argument("--unavailable-partitions", action="store_true",
                        help="describe: only partitions without a leader")
    parser.add_argument("--under-min-isr-partitions", action="store_true",
                        help="describe: only partitions whose ISR is below min.insync.replicas")
    parser.add_argument("--at-min-isr-partitions", action="store_true",
                        help="describe: only partitions whose ISR is at min.insync.replicas")
    parser.add_argument("--topics-with-overrides", action="store_true",
                        help="describe: only topics that override a config")
    parser.add_argument("--replica-assignment", metavar="B1:B2,B3:B4",
                        help="create: partition p's replicas are the p-th ':'-list "
                             "(instead of --partitions and --replication-factor)")


def run(args: argparse.Namespace) -> int:
    try:
        ck = require_client()
        config = client_config(args.bootstrap_server, read_properties(args.command_config))
        admin = Admin(ck.admin.AdminClient(config), reach(config))
        admin.reach.connect(admin.client)
        if args.create:
            create(admin, args)
        elif args.list:
            names = topic_names(admin, None, args.exclude_internal)
            if names:
                print("\n".join(names))
        elif args.describe:
            describe(admin, args)
        elif args.alter:
            alter(admin, args)
        elif args.delete:
            delete(admin, args)
        return 0
    except ToolError as exc:
        print(f"Error while executing topic command : {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `| head` closed stdout: the CLI ends quietly
        raise
    except Exception as exc:  # a KafkaException from the client
        print(f"Error while executing topic command : {kafka_message(exc)}", file=sys.stderr)
        return 1


@dataclass
class Admin:
    """The AdminClient and how long its calls may wait for the brokers."""

    client: Any
    reach: Reach


def _need_topic(args: argparse.Namespace) -> str:
    if not args.topic:
        raise ToolError("--topic is required")
    return str(args.topic)


def create(admin: Admin, args: argparse.Namespace) -> None:
    ck = require_client()
    name = _need_topic(args)
    configs = parse_pairs(args.config, "config")
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise ToolError("--replica-assignment takes the place of --partitions and "
                            "--replication-factor")
        assignment = replica_assignment(args.replica_assignment)
        new = ck.admin.NewTopic(name, num_partitions=len(assignment),
                                replica_assignment=assignment, config=configs)
    else:
        new = ck.admin.NewTopic(
            name,
            num_partitions=args.partitions if args.partitions is not None else -1,
            replication_factor=(args.replication_factor
                                if args.replication_factor is not None else -1),
            config=configs,
        )
    try:
        admin.reach.call(lambda: admin.client.create_topics(
            [new], request_timeout=admin.reach.timeout_s)[name], f"creating topic {name}")
    except ck.KafkaException as exc:
        if args.if_not_exists and exc.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS:
            return
        raise
    print(f"Created topic {name}.")


def replica_assignment(text: str) -> list[list[int]]:
    """Kafka's `0:1,1:2`: partition p's replicas are the p-th comma item's broker ids."""
    try:
        assignment = [[int(b) for b in item.split(":")] for item in text.split(",")]
    except ValueError:
        raise ToolError(f"invalid --replica-assignment '{text}': expected broker ids as "
                        "B1:B2,B3:B4 (a ':'-list per partition)") from None
    if len({len(replicas) for replicas in assignment}) != 1:
        raise ToolError("--replica-assignment: every partition needs the same number of "
                        "replicas")
    return assignment


def topic_names(admin: Admin, pattern: str | None, exclude_internal: bool) -> list[str]:
    metadata = admin.client.list_topics(timeout=admin.reach.timeout_s)
    names = sorted(metadata.topics)
    if exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    if pattern is not None:
        try:
            regex = re.compile(pattern)
        except re.error:
            regex = re.compile(re.escape(pattern))
        names = [n for n in names if regex.fullmatch(n)]
    return names


def _existing(admin: Admin, args: argparse.Namespace) -> list[str]:
    names = topic_names(admin, args.topic, args.exclude_internal)
    if args.topic is not None and not names and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    return names


@dataclass
class PartitionInfo:
    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicInfo:
    name: str
    topic_id: str | None
    partitions: list[PartitionInfo]


def describe_topics(admin: Admin, names: list[str]) -> list[TopicInfo]:
    """Topic ids and partitions: DescribeTopics where the client supports it, else Metadata."""
    ck = require_client()
    try:
        out = []
        for name in names:
            desc = admin.reach.call(lambda name=name: admin.client.describe_topics(
                ck.TopicCollection([name]), request_timeout=admin.reach.timeout_s)[name],
                f"describing topic {name}")
            topic_id = kafka_uuid(str(desc.topic_id)) if desc.topic_id is not None else None
            out.append(TopicInfo(name, topic_id, [
                PartitionInfo(p.id, p.leader.id if p.leader is not None else None,
                              [n.id for n in p.replicas], [n.id for n in p.isr])
                for p in desc.partitions]))
        return out
    except (AttributeError, TypeError, ck.KafkaException):
        metadata = admin.client.list_topics(timeout=admin.reach.timeout_s)
        out = []
        for name in names:
            topic = metadata.topics.get(name)
            if topic is None:
                continue
            out.append(TopicInfo(name, None, [
                PartitionInfo(p.id, p.leader if p.leader >= 0 else None, list(p.replicas),
                              list(p.isrs))
                for p in topic.partitions.values()]))
        return out


def topic_configs(admin: Admin, names: list[str]) -> dict[str, dict[str, Any]]:
    """name -> its config entries (name -> ConfigEntry)."""
    ck = require_client()
    resources = [ck.admin.ConfigResource(ck.admin.ResourceType.TOPIC, n) for n in names]
    if not resources:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for resource in resources:
        out[resource.name] = admin.reach.call(
            lambda resource=resource: admin.client.describe_configs(
                [resource], request_timeout=admin.reach.timeout_s)[resource],
            f"describing the configs of topic {resource.name}")
    return out


def overrides(entries: dict[str, Any]) -> str:
    """`k=v,...` of the non-default configs, as kafka-topics prints them."""
    return ",".join(f"{e.name}={'' if e.value is None else e.value}"
                    for e in entries.values() if not e.is_default)


def min_isr(entries: dict[str, Any]) -> int:
    entry = entries.get("min.insync.replicas")
    try:
        return int(entry.value) if entry is not None else 1
    except (TypeError, ValueError):
        return 1


def kafka_uuid(text: str) -> str:
    """Kafka's Uuid.toString (URL-safe base64, no padding), as kafka-topics.sh prints a
    TopicId; confluent-kafka's str() of a Uuid is standard base64."""
    return text.replace("+", "-").replace("/", "_").rstrip("=")


def _zero_id(topic_id: str | None) -> bool:
    return not topic_id or topic_id in ("AAAAAAAAAAAAAAAAAAAAAA", "0" * 32)


def describe(admin: Admin, args: argparse.Namespace) -> None:
    names = _existing(admin, args)
    topics = sorted(describe_topics(admin, names), key=lambda t: t.name)
    configs = topic_configs(admin, [t.name for t in topics])
    filtered = (args.under_replicated_partitions or args.unavailable_partitions
                or args.under_min_isr_partitions or args.at_min_isr_partitions)
    for topic in topics:
        entries = configs.get(topic.name, {})
        if args.topics_with_overrides and not overrides(entries):
            continue
        partitions = sorted(topic.partitions, key=lambda p: p.partition)
        if not filtered:
            replication = len(partitions[0].replicas) if partitions else 0
            line = f"Topic: {topic.name}"
            if not _zero_id(topic.topic_id):
                line += f"\tTopicId: {topic.topic_id}"
            line += (f"\tPartitionCount: {len(partitions)}\tReplicationFactor: {replication}"
                     f"\tConfigs: {overrides(entries)}")
            print(line)
        if args.topics_with_overrides:
            continue  # Kafka prints the topic lines only
        for p in partitions:
            if args.under_replicated_partitions and len(p.isr) >= len(p.replicas):
                continue
            if args.unavailable_partitions and p.leader is not None:
                continue
            if args.under_min_isr_partitions and len(p.isr) >= min_isr(entries):
                continue
            if args.at_min_isr_partitions and len(p.isr) != min_isr(entries):
                continue
            leader = "none" if p.leader is None else str(p.leader)
            print(f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {leader}"
                  f"\tReplicas: {','.join(map(str, p.replicas))}"
                  f"\tIsr: {','.join(map(str, p.isr))}")


def alter(admin: Admin, args: argparse.Namespace) -> None:
    ck = require_client()
    name = _need_topic(args)
    if args.config:
        raise ToolError("--config cannot be used with --alter: a topic's configs change with "
                        f"pybroker configs --entity-type topics --entity-name {name} --alter "
                        f"--add-config {args.config[0]}")
    if args.partitions is None:
        raise ToolError("--partitions is required with --alter")
    names = _existing(admin, args)
    if not names:
        return
    for name in names:
        admin.reach.call(lambda name=name: admin.client.create_partitions(
            [ck.admin.NewPartitions(name, args.partitions)],
            request_timeout=admin.reach.timeout_s)[name], f"adding partitions to {name}")


def delete(admin: Admin, args: argparse.Namespace) -> None:
    _need_topic(args)
    names = _existing(admin, args)
    if not names:
        return
    for name in names:
        admin.reach.call(lambda name=name: admin.client.delete_topics(
            [name], request_timeout=admin.reach.timeout_s)[name], f"deleting topic {name}")
