"""`pybroker acls`: kafka-acls.sh — add, remove and list ACLs.

An AdminClient tool (CreateAcls / DeleteAcls / DescribeAcls), so it works
against stock Kafka too. The options and output follow Kafka's AclCommand:
  pybroker acls --bootstrap-server B --add --allow-principal User:alice \\
      --operation Read --operation Describe --topic orders [--resource-pattern-type prefixed]
  pybroker acls --bootstrap-server B --list [--topic orders] [--principal User:alice]
  pybroker acls --bootstrap-server B --remove --allow-principal User:alice --topic orders
`--producer` / `--consumer` add the ACLs a producer (Write, Describe, Create on the
topic) or a consumer (Read, Describe on the topic, Read on --group) needs."""

from __future__ import annotations

import argparse
import re
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

COMMAND = "acls"
HELP = "add, remove or list ACLs (kafka-acls.sh)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of AdminClient configs (security settings)")
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--add", action="store_true", help="Add ACLs.")
    actions.add_argument("--remove", action="store_true", help="Remove ACLs.")
    actions.add_argument("--list", action="store_true", help="List ACLs.")
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host",
                 "--operation", "--topic", "--group", "--transactional-id"):
        parser.add_argument(flag, action="append", default=[])
    parser.add_argument("--principal", help="--list: only this principal's ACLs")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", default=None,
                        help="LITERAL (default for --add/--remove), PREFIXED, or for "
                             "--list/--remove ANY and MATCH")
    parser.add_argument("--producer", action="store_true",
                        help="the ACLs a producer needs on --topic")
    parser.add_argument("--consumer", action="store_true",
                        help="the ACLs a consumer needs on --topic and --group")
    parser.add_argument("--force", action="store_true", help="never ask (pybroker never asks)")


def _enum(enum_cls: Any, text: str, what: str) -> Any:
    """Kafka's spellings: Read, DescribeConfigs, IDEMPOTENT_WRITE, prefixed."""
    snake = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", text.strip()).replace("-", "_").upper()
    try:
        return enum_cls[snake]
    except KeyError:
        raise ToolError(f"Invalid {what}: {text}") from None


def _resources(ck: Any, args: argparse.Namespace) -> list[tuple[Any, str]]:
    rt = ck.admin.ResourceType
    out = [(rt.TOPIC, t) for t in args.topic] + [(rt.GROUP, g) for g in args.group]
    out += [(rt.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((rt.BROKER, "kafka-cluster"))
    return out


def _bindings(ck: Any, args: argparse.Namespace) -> list[Any]:
    admin = ck.admin
    rt, op = admin.ResourceType, admin.AclOperation
    pattern = _enum(admin.ResourcePatternType, args.resource_pattern_type or "LITERAL",
                    "resource pattern type")
    if pattern not in (admin.ResourcePatternType.LITERAL, admin.ResourcePatternType.PREFIXED):
        raise ToolError("A '--resource-pattern-type' value of 'LITERAL' or 'PREFIXED' is "
                        "required with --add")
    wanted: list[tuple[Any, str, Any]] = []
    operations = [_enum(op, o, "operation") for o in args.operation] or [op.ALL]
    if args.producer or args.consumer:
        for topic in args.topic:
            ops = ([op.WRITE, op.DESCRIBE, op.CREATE] if args.producer else []) + (
                [op.READ, op.DESCRIBE] if args.consumer else [])
            wanted += [(rt.TOPIC, topic, o) for o in dict.fromkeys(ops)]
        if args.consumer:
            wanted += [(rt.GROUP, g, op.READ) for g in args.group]
        if args.producer:
            wanted += [(rt.TRANSACTIONAL_ID, t, op.WRITE) for t in args.transactional_id]
    else:
        wanted = [(kind, name, o) for kind, name in _resources(ck, args) for o in operations]
    if not wanted:
        raise ToolError("You must specify one of: --topic, --cluster, --group, "
                        "--transactional-id")
    perms = admin.AclPermissionType
    entries = [(p, h, perms.ALLOW) for p in args.allow_principal
               for h in (args.allow_host or ["*"])]
    entries += [(p, h, perms.DENY) for p in args.deny_principal
                for h in (args.deny_host or ["*"])]
    if not entries:
        raise ToolError("You must specify one of: --allow-principal, --deny-principal when "
                        "trying to add ACLs.")
    return [admin.AclBinding(kind, name, pattern, principal, host, operation, perm)
            for kind, name, operation in wanted for principal, host, perm in entries]


def _filters(ck: Any, args: argparse.Namespace) -> list[Any]:
    admin = ck.admin
    pattern = _enum(admin.ResourcePatternType,
                    args.resource_pattern_type or ("ANY" if args.list else "LITERAL"),
                    "resource pattern type")
    resources = _resources(ck, args) or [(admin.ResourceType.ANY, None)]
    principals = [(p, admin.AclPermissionType.ALLOW) for p in args.allow_principal]
    principals += [(p, admin.AclPermissionType.DENY) for p in args.deny_principal]
    if args.list or not principals:
        principals = [(args.principal, admin.AclPermissionType.ANY)]
    operations = [_enum(admin.AclOperation, o, "operation") for o in args.operation] or [
        admin.AclOperation.ANY]
    return [admin.AclBindingFilter(kind, name, pattern, principal, None, operation, perm)
            for kind, name in resources for principal, perm in principals
            for operation in operations]


def _pattern_line(binding: Any) -> str:
    kind = "CLUSTER" if binding.restype.name == "BROKER" else binding.restype.name
    return (f"ResourcePattern(resourceType={kind}, name={binding.name}, "
            f"patternType={binding.resource_pattern_type.name})")


def _entry_line(binding: Any) -> str:
    return (f"(principal={binding.principal}, host={binding.host}, "
            f"operation={binding.operation.name}, "
            f"permissionType={binding.permission_type.name})")


def _print_grouped(title: str, bindings: list[Any]) -> None:
    groups: dict[str, list[str]] = {}
    for binding in bindings:
        groups.setdefault(_pattern_line(binding), []).append(_entry_line(binding))
    for pattern, lines in groups.items():
        print(f"{title} `{pattern}`: ")
        for line in sorted(set(lines)):
            print(f" \t{line} ")
        print()


def run(args: argparse.Namespace) -> int:
    try:
        ck = require_client()
        config = client_config(args.bootstrap_server, read_properties(args.command_config))
        client = ck.admin.AdminClient(config)
        waits = reach(config)
        if args.add:
            bindings = _bindings(ck, args)
            _print_grouped("Adding ACLs for resource", bindings)
            for binding in bindings:
                waits.call(lambda binding=binding: client.create_acls([binding])[binding],
                           "adding ACLs")
        elif args.remove:
            removed: list[Any] = []
            for flt in _filters(ck, args):
                removed += waits.call(lambda flt=flt: client.delete_acls([flt])[flt],
                                      "removing ACLs")
            _print_grouped("Removed ACLs for resource", removed)
        else:
            found: list[Any] = []
            for flt in _filters(ck, args):
                found += waits.call(lambda flt=flt: client.describe_acls(flt),
                                    "listing ACLs")
            _print_grouped("Current ACLs for resource", found)
        return 0
    except ToolError as exc:
        print(f"Error while executing ACL command: {exc}", file=sys.stderr)
        return 1
    except ck.KafkaException as exc:
        print(f"Error while executing ACL command: {kafka_message(exc)}", file=sys.stderr)
        return 1
