"""Client quotas (Kafka's ClientQuotaManager): produce and fetch byte rates and
request-time percentage per user, client id, or user + client id, with Kafka's
precedence and its windowed rate.

Configs live with the entity in the metadata store (`users/<user>`,
`clients/<client-id>`, `users/<user>/clients/<client-id>`, `<default>` for the
defaults; pybroker.security.store). For a request the first of these that sets
the quota applies (Kafka's order):
  users/<u>/clients/<c>, users/<u>/clients/<default>, users/<u>,
  users/<default>/clients/<c>, users/<default>/clients/<default>, users/<default>,
  clients/<c>, clients/<default>
and each (user, client id) it covers is measured on its own.

The rate is Kafka's: the sum over the last `quota.window.num` samples of
`quota.window.size.seconds`, divided by the time they span, counted as at least
(num - 1) whole windows (so a burst at the start may pass unthrottled). Over the
quota, the throttle is (rate - quota) / quota * window, sent as throttle_time_ms;
the connection then reads nothing for that long (the channel is muted, KIP-219).
Request time is the handler's process time, an approximation of Kafka's
I/O-thread time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from pybroker.config import BrokerConfig
from pybroker.security.store import SecurityStore, desanitize, sanitize

log = logging.getLogger(__name__)

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
#: the keys AlterClientQuotas takes (controller_mutation_rate is accepted and stored)
QUOTA_KEYS = (PRODUCE, FETCH, REQUEST, "controller_mutation_rate")
DEFAULT = "<default>"
#: seconds between looks for quota changes made through another broker (cluster mode)
REFRESH_INTERVAL_S = 1.0
PRODUCE_KEY, FETCH_KEY = 0, 1


def entity_path(user: str | None, client: str | None) -> str:
    """The store path of an entity; "" names the default (<default>)."""
    parts = []
    if user is not None:
        parts.append("users/" + (DEFAULT if user == "" else sanitize(user)))
    if client is not None:
        parts.append("clients/" + (DEFAULT if client == "" else sanitize(client)))
    return "/".join(parts)


def parse_path(path: str) -> tuple[str | None, str | None] | None:
    """(user, client id) of a store path ("" for <default>), None if not a quota entity."""
    parts = path.split("/")
    user = client = None
    while parts:
        if len(parts) < 2:
            return None
        kind, name = parts[0], parts[1]
        value = "" if name == DEFAULT else desanitize(name)
        if kind == "users" and user is None and client is None:
            user = value
        elif kind == "clients" and client is None:
            client = value
        else:
            return None
        parts = parts[2:]
    return (user, client) if (user, client) != (None, None) else None


class Rate:
    """Kafka's SampledStat Rate over `samples` windows of `window_s`."""

    __slots__ = ("samples", "window_s", "_data")

    def __init__(self, samples: int, window_s: float) -> None:
        self.samples = samples
        self.window_s = window_s
        self._data: deque[list[float]] = deque()  # [start, value]

    def record(self, value: float, now: float) -> None:
        if not self._data or now - self._data[-1][0] >= self.window_s:
            self._data.append([now, 0.0])
            while len(self._data) > self.samples:
                self._data.popleft()
        self._data[-1][1] += value

    def window(self, now: float) -> float:
        while self._data and now - self._data[0][0] >= self.samples * self.window_s:
            self._data.popleft()
        elapsed = now - self._data[0][0] if self._data else 0.0
        full = int(elapsed / self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return max(elapsed, self.window_s)

    def measure(self, now: float) -> float:
        span = self.window(now)
        return sum(v for _, v in self._data) / span


class ClientQuotas:
    def __init__(self, config: BrokerConfig, store: SecurityStore) -> None:
        self.samples = int(config["quota.window.num"])
        self.window_s = float(config["quota.window.size.seconds"])
        self.store = store
        #: entity (user, client) -> {quota key: value}
        self.configs: dict[tuple[str | None, str | None], dict[str, float]] = {}
        self._rates: dict[tuple[str, str | None, str | None], Rate] = {}
        self._loaded = False
        self._version: object = None
        self._refresher: asyncio.Task[None] | None = None

    @property
    def active(self) -> bool:
        """Worth measuring requests: quotas are set (or not loaded yet)."""
        return bool(self.configs) or not self._loaded

    async def ready(self) -> None:
        if self._loaded:
            return
        self.configs = await self._load()
        self._version = await self.store.config_version()
        self._loaded = True
        if self._version is not None and self._refresher is None:
            self._refresher = asyncio.get_running_loop().create_task(self._refresh())

    def close(self) -> None:
        """Stop re-reading the store: after the broker's shutdown it is closed, and a
        refresh would only log its absence after the broker said it shut down."""
        if self._refresher is not None:
            self._refresher.cancel()
            self._refresher = None

    async def _load(self) -> dict[tuple[str | None, str | None], dict[str, float]]:
        out = {}
        for path, config in (await self.store.all_entity_configs()).items():
            entity = parse_path(path)
            values = {k: float(v) for k, v in config.items() if k in QUOTA_KEYS}
            if entity is not None and values:
                out[entity] = values
        return out

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_INTERVAL_S)
            try:
                version = await self.store.config_version()
                if version != self._version:
                    self.configs = await self._load()
                    self._version = version
            except Exception as exc:  # the store may be unreachable for a while
                log.info("reloading client quotas: %s", exc)

    def set(self, entity: tuple[str | None, str | None], values: dict[str, float]) -> None:
        if values:
            self.configs[entity] = values
        else:
            self.configs.pop(entity, None)

    # --- enforcement ---------------------------------------------------------------
    def quota(self, key: str, user: str, client: str
              ) -> tuple[float, tuple[str | None, str | None]] | None:
        """The quota on (user, client) and the entity it is measured for (Kafka's order)."""
        configs = self.configs
        for u, c in ((user, client), (user, ""), (user, None), ("", client), ("", ""),
                     ("", None), (None, client), (None, "")):
            values = configs.get((u, c))
            if values is not None and key in values:
                # a default covers each user / client id on its own
                return values[key], (None if u is None else user, None if c is None else client)
        return None

    def record(self, key: str, user: str, client: str, value: float, now: float) -> int:
        """Record `value` and return the throttle in ms (0 within the quota)."""
        found = self.quota(key, user, client)
        if found is None:
            return 0
        bound, (u, c) = found
        rate = self._rates.get((key, u, c))
        if rate is None:
            rate = self._rates[(key, u, c)] = Rate(self.samples, self.window_s)
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound or bound <= 0:
            return 0
        throttle_s = (observed - bound) / bound * rate.window(now)
        return int(min(throttle_s, self.samples * self.window_s) * 1000)

    async def on_response(self, conn: Any, api_key: int, client_id: str | None,
                          request_bytes: int, response: dict[str, Any],
                          cpu_s: float) -> int:
        """Record a handled request; the throttle (ms) written into its response."""
        await self.ready()
        if not self.configs:
            return 0
        session = getattr(conn, "session", None)
        principal = session.principal if session is not None else "User:ANONYMOUS"
        user = principal.partition(":")[2]
        client = client_id or ""
        now = time.monotonic()
        throttle = self.record(REQUEST, user, client, cpu_s * 100, now)
        if api_key == PRODUCE_KEY:
            throttle = max(throttle, self.record(PRODUCE, user, client, request_bytes, now))
        elif api_key == FETCH_KEY:
            size = sum(len(p["records"] or b"") for t in response.get("responses", ())
                       for p in t["partitions"])
            throttle = max(throttle, self.record(FETCH, user, client, size, now))
        if throttle and "throttle_time_ms" in response:
            response["throttle_time_ms"] = max(int(response["throttle_time_ms"] or 0), throttle)
        return throttle


_QUOTAS: dict[int, ClientQuotas] = {}


def quotas_for(config: BrokerConfig, backend: object) -> ClientQuotas:
    found = _QUOTAS.get(id(backend))
    if found is None:
        from pybroker.security.store import store_for

        found = ClientQuotas(config, store_for(backend, config.log_dirs[0]))
        _QUOTAS[id(backend)] = found
    return found
