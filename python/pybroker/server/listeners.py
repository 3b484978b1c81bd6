"""Listener addresses (`listeners`, `advertised.listeners`) and their sockets."""

from __future__ import annotations

import dataclasses
import socket

from pybroker.config import ConfigError

#: pending connections the kernel queues per listener before accept
ACCEPT_BACKLOG = 512


@dataclasses.dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(text: str) -> list[Listener]:
    """`PLAINTEXT://host:port,NAME://[::1]:port` -> listeners."""
    listeners = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        if "://" not in item:
            raise ConfigError(f"listener {item!r} is not NAME://host:port")
        name, address = item.split("://", 1)
        host, _, port = address.rpartition(":")
        listeners.append(Listener(name.upper(), host.strip("[]"), int(port)))
    return listeners


def bind_listener(listener: Listener) -> socket.socket:
    """A non-blocking listening socket for `listener` (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((listener.host or ("::" if family == socket.AF_INET6 else "0.0.0.0"),
               listener.port))
    sock.listen(ACCEPT_BACKLOG)
    sock.setblocking(False)
    return sock
