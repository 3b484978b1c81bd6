"""Where a tool finds its brokers, and the one-second check that something listens there.

`--bootstrap-server` may be left out: the tool then takes `bootstrap.servers` from its
properties (`--command-config` and the like), else $PYBROKER_BOOTSTRAP_SERVER (as rpk
reads RPK_BROKERS), else localhost:9092, Kafka's default port.

An address without a port is refused, as Kafka's clients refuse it ("Invalid url in
bootstrap.servers"), rather than silently meaning 9092.

Before the client starts, every bootstrap address gets one TCP connect: when all of
them refuse (nothing listens) or do not resolve, waiting the tool's timeout cannot
help, so the tool ends at once with that reason. A connect that times out, or one that
succeeds, leaves the decision to the client and its timeout (a broker starting up, a
slow network)."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Iterable

from pybroker.tools._common import ToolError, parse_pairs, read_properties

ENV = "PYBROKER_BOOTSTRAP_SERVER"
DEFAULT = "localhost:9092"
#: how long the check waits for one address's connect; a refused connect is at once
PROBE_TIMEOUT_S = 1.0
#: the tool options whose properties may name bootstrap.servers: files, then k=v lists
PROPERTY_FILES = ("command_config", "producer_config", "consumer_config")
PROPERTY_LISTS = ("producer_props", "producer_property", "consumer_property")


def settle(args: argparse.Namespace) -> None:
    """Fill in args.bootstrap_server (given, else properties, else the environment, else
    the default), check its form, and refuse at once when nothing listens there."""
    chosen = args.bootstrap_server or from_properties(args) or os.environ.get(ENV) or DEFAULT
    args.bootstrap_server = chosen
    addresses = parse(chosen)
    if not getattr(args, "wait_for_brokers", 0):  # a wait for brokers still starting
        probe(addresses)


def from_properties(args: argparse.Namespace) -> str | None:
    found: str | None = None
    for name in PROPERTY_FILES:
        path = getattr(args, name, None)
        if path:
            found = read_properties(path).get("bootstrap.servers") or found
    for name in PROPERTY_LISTS:
        items: Iterable[str] = getattr(args, name, None) or ()
        found = parse_pairs(items).get("bootstrap.servers") or found
    return found


def parse(bootstrap: str) -> list[tuple[str, int]]:
    """`host:port,host:port` ([v6]:port too) -> addresses; ToolError for a bad item."""
    addresses = []
    for raw in bootstrap.split(","):
        item = raw.strip()
        if "://" in item:  # PLAINTEXT://host:port, as listeners are written
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host or host.endswith(":"):
            raise ToolError(f"invalid bootstrap server '{raw.strip()}': expected HOST:PORT "
                            f"(e.g. 127.0.0.1:9092); a port is required")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def probe(addresses: list[tuple[str, int]]) -> None:
    """Return once any address accepts or might (a timeout); ToolError naming each
    address's reason when every one refused or did not resolve."""
    reasons = []
    for host, port in addresses:
        reason = _connect(host, port)
        if reason is None:
            return
        reasons.append(f"{host}:{port}: {reason}")
    raise ToolError("cannot connect to " + "; ".join(reasons) + ". Is a broker running "
                    "there? (pybroker serve; --bootstrap-server or " + ENV + " point "
                    "elsewhere)")


def _connect(host: str, port: int) -> str | None:
    """None when waiting may help (connected, or no answer yet); else why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"cannot resolve host ({exc.strerror})"
    failed = ""
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(PROBE_TIMEOUT_S)
            try:
                sock.connect(address)
            except TimeoutError:
                return None  # no answer yet (a filtered port, a slow host): the client waits
            except OSError as exc:
                # refused, or unreachable from here: the next address may do
                failed = failed or exc.strerror or str(exc)
                continue
            return None
    return failed or "no address"
