"""Connection limits: `max.connections`, `max.connections.per.ip` and
`max.connections.per.ip.overrides`, with Kafka's behaviour (ConnectionQuotas):

- at `max.connections` the broker stops accepting: new connections wait in the
  listen backlog until a connection closes (Kafka's acceptor blocks the same
  way; clients see a slow connect, not a refusal);
- a connection from an address already at its limit is closed as soon as it
  is accepted, and the rejection is logged."""

from __future__ import annotations

import logging
import socket

import anyio

from pybroker.config import BrokerConfig, ConfigError

log = logging.getLogger(__name__)


def parse_overrides(text: str) -> dict[str, int]:
    """`hostName:100,127.0.0.1:200` -> {address: limit}; host names are resolved
    once, at startup (Kafka resolves them when the config is read)."""
    limits: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        bad = ConfigError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise bad
        try:
            limit = int(count)
        except ValueError as exc:
            raise bad from exc
        if limit < 0:
            raise bad
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise ConfigError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: "
                              f"{exc}") from exc
        for info in infos:
            limits[str(info[4][0])] = limit
    return limits


class ConnectionQuotas:
    """Counts of open connections, in total and per client address."""

    def __init__(self, max_connections: int, max_per_ip: int,
                 overrides: dict[str, int] | None = None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = overrides or {}
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self._freed: anyio.Event | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ConnectionQuotas:
        overrides = parse_overrides(config["max.connections.per.ip.overrides"] or "")
        max_per_ip = config["max.connections.per.ip"]
        if max_per_ip == 0 and not overrides:
            raise ConfigError("max.connections.per.ip can be set to zero only if "
                              "max.connections.per.ip.overrides is set")
        return cls(config["max.connections"], max_per_ip, overrides)

    def reconfigure(self, config: BrokerConfig) -> None:
        """Take changed limits (dynamic broker configs): connections already open stay;
        new ones meet the new limits, and waiters are let in if max.connections grew.
        Limits that do not validate are logged and the old ones kept."""
        try:
            fresh = ConnectionQuotas.from_config(config)
        except ConfigError as exc:
            log.error("the new connection limits are invalid (%s): the previous ones stay. "
                      "Correct them with pybroker configs --alter", exc)
            return
        self.max_connections = fresh.max_connections
        self.max_per_ip = fresh.max_per_ip
        self.overrides = fresh.overrides
        if self._freed is not None and self.total < self.max_connections:
            self._freed.set()
            self._freed = None

    def limit_for(self, host: str) -> int:
        return self.overrides.get(host, self.max_per_ip)

    async def wait_for_slot(self) -> None:
        """Return once the broker is below max.connections."""
        while self.total >= self.max_connections:
            if self._freed is None:
                self._freed = anyio.Event()
            await self._freed.wait()

    def add(self, host: str) -> bool:
        """Count a new connection from `host`; False when `host` is over its limit
        (the caller closes the connection and calls remove)."""
        count = self.per_ip.get(host, 0)
        self.per_ip[host] = count + 1
        self.total += 1
        return count < self.limit_for(host)

    def remove(self, host: str) -> None:
        count = self.per_ip.get(host, 0)
        if count <= 1:
            self.per_ip.pop(host, None)
        else:
            self.per_ip[host] = count - 1
        self.total -= 1
        if self._freed is not None and self.total < self.max_connections:
            self._freed.set()
            self._freed = None
