"""`pybroker configs --entity-type users|clients` (kafka-configs.sh's forms for
client quotas and SCRAM credentials), for the configs tool to hand these entity
types to:

  pybroker configs --bootstrap-server B --alter --entity-type users --entity-name alice \\
      --add-config 'producer_byte_rate=1048576,SCRAM-SHA-512=[iterations=8192,password=pw]'
  pybroker configs --bootstrap-server B --alter --entity-type clients --entity-default \\
      --add-config consumer_byte_rate=2097152
  pybroker configs --bootstrap-server B --describe --entity-type users [--entity-name alice]
  pybroker configs ... --alter --entity-type users --entity-name alice \\
      --delete-config producer_byte_rate,SCRAM-SHA-512

The requests (Describe/AlterClientQuotas, AlterUserScramCredentials) go through
pybroker's own protocol codec and broker connection, with the security settings
of --command-config (security.protocol, sasl.mechanism, sasl.jaas.config or
sasl.username/sasl.password, ssl.truststore.location or ssl.ca.location). The
SCRAM password is salted here, as Kafka's tool does: only the salted form is sent."""

from __future__ import annotations

import argparse
import hashlib
import os
import ssl
from typing import Any

import anyio

from pybroker.client.connection import BrokerConnection, BrokerUnreachable
from pybroker.errors import ErrorCode
from pybroker.security.inter_broker import InterBrokerSecurity
from pybroker.security.sasl import jaas_options
from pybroker.security.scram import BY_TYPE, MECHANISMS, MIN_ITERATIONS
from pybroker.tools._common import ToolError, read_properties

ENTITY = {"users": "user", "clients": "client-id"}
SHOWN = {"users": "user-principal", "clients": "client-id"}


def handles(args: argparse.Namespace) -> bool:
    """Whether the configs tool should hand this invocation here."""
    return getattr(args, "entity_type", None) in ENTITY


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's --add-config: k=v pairs by commas, [..] keeping commas inside a value."""
    out: dict[str, str] = {}
    depth, current = 0, ""
    for ch in text + ",":
        if ch == "," and depth == 0:
            if current.strip():
                key, sep, value = current.partition("=")
                if not sep:
                    raise ToolError(f"Invalid entity config: all configs to be added must be "
                                    f"in the format \"key=val\": {current}")
                out[key.strip()] = value.strip()
            current = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        current += ch
    return out


def _security(props: dict[str, str]) -> InterBrokerSecurity:
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(
            cafile=props.get("ssl.ca.location") or props.get("ssl.truststore.location"))
        if props.get("ssl.endpoint.identification.algorithm", "https") in ("", "none"):
            context.check_hostname = False
    if not protocol.startswith("SASL"):
        return InterBrokerSecurity(protocol, context)
    options = jaas_options(props.get("sasl.jaas.config", ""))
    return InterBrokerSecurity(protocol, context, props.get("sasl.mechanism", "PLAIN"),
                               props.get("sasl.username", options.get("username", "")),
                               props.get("sasl.password", options.get("password", "")))


async def _run(args: argparse.Namespace) -> list[str]:
    props = read_properties(getattr(args, "command_config", None))
    host, _, port = args.bootstrap_server.split(",")[0].rpartition(":")
    conn = BrokerConnection(host, int(port), "pybroker-configs", 30.0, security=_security(props))
    try:
        if args.describe:
            return await _describe(conn, args)
        return await _alter(conn, args)
    finally:
        await conn.close()


def run(args: argparse.Namespace) -> int:
    try:
        for line in anyio.run(_run, args):
            print(line)
        return 0
    except (ToolError, BrokerUnreachable) as exc:
        print(f"Error while executing config command with args '{args.entity_type}': {exc}")
        return 1


def _items(value: str | list[str] | None) -> list[str]:
    """The configs tool gives one string; a list (repeated options) works too."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _name(args: argparse.Namespace) -> str | None:
    """The entity name; "" for --entity-default, None for every entity."""
    if getattr(args, "entity_default", False):
        return ""
    return args.entity_name


async def _describe(conn: BrokerConnection, args: argparse.Namespace) -> list[str]:
    name = _name(args)
    kind = ENTITY[args.entity_type]
    component = {"entity_type": kind, "match_type": 2 if name is None else (
        1 if name == "" else 0), "match": name or None}
    answer = await conn.request(48, 0, {"components": [component], "strict": True})
    if answer["error_code"]:
        raise ToolError(str(answer["error_message"] or ErrorCode(answer["error_code"]).name))
    lines = []
    for entry in answer["entries"] or []:
        shown = entry["entity"][0]["entity_name"]
        label = "the default" if shown is None else f"'{shown}'"
        values = ", ".join(f"{v['key']}={v['value']}" for v in entry["values"])
        lines.append(f"Quota configs for {SHOWN[args.entity_type]} {label} are {values}")
    if args.entity_type == "users" and name:
        scram = await conn.request(50, 0, {"users": [{"name": name}]})
        for result in scram["results"]:
            if result["error_code"] == 0 and result["credential_infos"]:
                infos = ",".join(f"{BY_TYPE[i['mechanism']]}=iterations={i['iterations']}"
                                 for i in result["credential_infos"])
                lines.append(f"SCRAM credential configs for user-principal '{name}' are "
                             f"{infos}")
    return lines


async def _alter(conn: BrokerConnection, args: argparse.Namespace) -> list[str]:
    name = _name(args)
    if name is None:
        raise ToolError("an entity name (--entity-name or --entity-default) is required "
                        "with --alter")
    added = parse_add_config(",".join(_items(getattr(args, "add_config", None))))
    deleted = [d.strip() for item in _items(getattr(args, "delete_config", None))
               for d in item.split(",") if d.strip()]
    scram_set = {k: v for k, v in added.items() if k in MECHANISMS}
    scram_del = [d for d in deleted if d in MECHANISMS]
    ops = [{"key": k, "value": float(v), "remove": False} for k, v in added.items()
           if k not in MECHANISMS]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in deleted if k not in MECHANISMS]
    if (scram_set or scram_del) and (args.entity_type != "users" or not name):
        raise ToolError("SCRAM credentials are set for a named user only")
    if ops:
        answer = await conn.request(49, 0, {"entries": [{"entity": [
            {"entity_type": ENTITY[args.entity_type], "entity_name": name or None}],
            "ops": ops}], "validate_only": False})
        for entry in answer["entries"]:
            if entry["error_code"]:
                raise ToolError(str(entry["error_message"]
                                    or ErrorCode(entry["error_code"]).name))
    if scram_set or scram_del:
        upserts = []
        for mechanism, spec in scram_set.items():
            fields = parse_add_config(spec.strip("[]"))
            if "password" not in fields:
                raise ToolError(f"{mechanism} needs password=...")
            iterations = int(fields.get("iterations", MIN_ITERATIONS))
            salt = os.urandom(32)
            salted = hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], fields["password"].encode(),
                                         salt, iterations)
            upserts.append({"name": name, "mechanism": MECHANISMS[mechanism][1],
                            "iterations": iterations, "salt": salt, "salted_password": salted})
        answer = await conn.request(51, 0, {
            "deletions": [{"name": name, "mechanism": MECHANISMS[m][1]} for m in scram_del],
            "upsertions": upserts})
        for result in answer["results"]:
            if result["error_code"]:
                raise ToolError(str(result["error_message"]
                                    or ErrorCode(result["error_code"]).name))
    shown = "default" if name == "" else name
    kind: Any = args.entity_type[:-1]
    return [f"Completed updating config for {kind} {shown}."]
