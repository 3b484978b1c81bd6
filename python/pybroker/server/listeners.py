"""Listener addresses (`listeners`, `advertised.listeners`,
`listener.security.protocol.map`) and their sockets.

Validation follows Kafka's (KafkaConfig / CoreUtils.listenerListToEndPoints),
with its messages: an entry must be `NAME://host:port`; a listener name must be
in the security protocol map; names are unique, and so are ports, except that
one IPv4 and one IPv6 address may share a port (port 0, "any free port", never
clashes); advertised names are a subset of the listeners' and never the
meta-address 0.0.0.0. Every protocol is served: SSL and SASL_SSL through
pybroker.security.tls, SASL through pybroker.security.sasl."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import socket
from collections import Counter

from pybroker.config import BrokerConfig, ConfigError
from pybroker.security.sasl import check_listeners as check_sasl_listeners

#: pending connections the kernel queues per listener before accept
ACCEPT_BACKLOG = 512

#: Kafka's SecurityProtocol names
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Kafka's endpoint pattern: NAME://host:port, host optionally in [brackets] (IPv6)
_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


@dataclasses.dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_protocol_map(text: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...` -> {NAME: PROTOCOL}, names upper-cased as Kafka normalises them."""
    mapping: dict[str, str] = {}
    for entry in filter(None, (p.strip() for p in text.split(","))):
        name, sep, protocol = entry.rpartition(":")
        if not sep or not name.strip():
            raise ConfigError("Error parsing configuration property "
                              f"'listener.security.protocol.map': bad entry '{entry}'")
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid security protocol `{protocol}` defined in "
                              "listener.security.protocol.map")
        mapping[name.strip().upper()] = protocol
    return mapping


def parse_listeners(text: str, protocols: dict[str, str] | None = None) -> list[Listener]:
    """`PLAINTEXT://host:port,NAME://[::1]:port` -> listeners, each with its security
    protocol from `protocols` (default: names that are protocols map to themselves)."""
    if protocols is None:
        protocols = {p: p for p in SECURITY_PROTOCOLS}
    listeners = []
    try:
        for item in filter(None, (p.strip() for p in text.split(","))):
            match = _ENDPOINT.fullmatch(item)
            if match is None:
                raise ConfigError(f"Unable to parse {item} to a broker endpoint")
            name = match.group(1).upper()
            port = int(match.group(3))
            if not 0 <= port <= 65535:
                raise ConfigError(f"port out of range: {port}")
            protocol = protocols.get(name)
            if protocol is None:
                raise ConfigError(f"No security protocol defined for listener {name}")
            listeners.append(Listener(name, match.group(2), port, protocol))
    except ConfigError as exc:
        raise ConfigError(f"Error creating broker listeners from '{text}': {exc}") from None
    return listeners


def _is_ip(host: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(host).version == version
    except ValueError:
        return False


def _check_names(listeners: list[Listener], text: str) -> None:
    if len({lis.name for lis in listeners}) != len(listeners):
        raise ConfigError(f"Each listener must have a different name, listeners: {text}")


def _check_ports(listeners: list[Listener], text: str) -> None:
    """Kafka's rule: distinct ports, but one IPv4 and one IPv6 address may share one."""
    counts = Counter(lis.port for lis in listeners if lis.port != 0)
    for port, count in counts.items():
        if count == 1:
            continue
        sharing = [lis for lis in listeners if lis.port == port]
        if count == 2 and (
                (_is_ip(sharing[0].host, 4) and _is_ip(sharing[1].host, 6))
                or (_is_ip(sharing[0].host, 6) and _is_ip(sharing[1].host, 4))):
            continue
        raise ConfigError(f"Each listener must have a different port, listeners: {text}")


def listener_settings(config: BrokerConfig) -> tuple[list[Listener], list[Listener]]:
    """The validated (listeners, advertised listeners) of `config`; ConfigError otherwise."""
    protocols = parse_protocol_map(config["listener.security.protocol.map"])
    text = config["listeners"]
    listeners = parse_listeners(text, protocols)
    if not listeners:
        raise ConfigError("listeners must not be empty")
    _check_names(listeners, text)
    _check_ports(listeners, text)
    advertised_text = config["advertised.listeners"]
    if advertised_text:
        advertised = parse_listeners(advertised_text, protocols)
        _check_names(advertised, advertised_text)
    else:
        advertised = list(listeners)
    names = [lis.name for lis in listeners]
    if not {lis.name for lis in advertised} <= set(names):
        raise ConfigError(
            "advertised.listeners listener names must be equal to or a subset of the ones "
            f"defined in listeners. Found {','.join(lis.name for lis in advertised)}. The "
            f"valid options based on the current configuration are {','.join(names)}")
    if any(lis.host == "0.0.0.0" for lis in advertised):
        raise ConfigError("advertised.listeners cannot use the nonroutable meta-address "
                          "0.0.0.0. Use a routable IP address.")
    inter_broker_listener(config, advertised)
    check_sasl_listeners(config, listeners)
    return listeners, advertised


def inter_broker_listener(config: BrokerConfig, advertised: list[Listener]) -> Listener:
    """The listener other brokers reach this one on: inter.broker.listener.name, else
    the listener named after security.inter.broker.protocol (Kafka's rule); a broker
    with neither falls back to its first advertised listener."""
    name = config["inter.broker.listener.name"]
    if name:
        for listener in advertised:
            if listener.name == name.upper():
                return listener
        raise ConfigError("inter.broker.listener.name must be a listener name defined in "
                          f"advertised.listeners. The valid options based on currently "
                          f"configured listeners are {','.join(i.name for i in advertised)}")
    protocol = config["security.inter.broker.protocol"]
    for listener in advertised:
        if listener.name == protocol:
            return listener
    return advertised[0]


def bind_listener(listener: Listener) -> socket.socket:
    """A non-blocking listening socket for `listener` (port 0: any free port).
    Raises OSError with Kafka's message when the address cannot be bound."""
    family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
    host = listener.host or ("::" if family == socket.AF_INET6 else "0.0.0.0")
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, listener.port))
        sock.listen(ACCEPT_BACKLOG)
    except OSError as exc:
        sock.close()
        raise OSError(f"Socket server failed to bind to {host}:{listener.port}: "
                      f"{exc.strerror or exc}.") from None
    sock.setblocking(False)
    return sock


def bind_listeners(listeners: list[Listener]) -> list[socket.socket]:
    """Sockets for every listener, or none: a failure closes the ones already bound."""
    sockets: list[socket.socket] = []
    try:
        for listener in listeners:
            sockets.append(bind_listener(listener))
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
