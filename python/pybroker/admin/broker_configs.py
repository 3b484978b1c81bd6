"""Dynamic broker configs (Kafka's DynamicBrokerConfig, ZooKeeper mode): changed with
AlterConfigs / IncrementalAlterConfigs on a BROKER resource (`kafka-configs.sh
--entity-type brokers`), stored in the coordination store as the entities
"brokers/<id>" and "brokers/<default>" (/config/brokers/... in ZooKeeper, the
metadata file on a single node), and applied without a restart.

Every broker watches the stored entities and puts its own and the default into its
BrokerConfig's dynamic layers; whatever reads a value through the BrokerConfig (topic
defaults, the replication throttles, the replica selector) sees the new one on its
next read. Listeners hear which keys changed, for the parts that hold a value
(open logs re-read their topic config)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from pybroker.admin.config_values import checked_configs
from pybroker.config import (
    BROKER_DEFAULT_ENTITY,
    BY_NAME,
    DYNAMIC_BROKER_KEYS,
    BrokerConfig,
    parse_dynamic,
)
from pybroker.coordination.base import CoordinationBackend, WatchHandle
from pybroker.errors import BUG_REPORT, ErrorCode, KafkaError

log = logging.getLogger(__name__)

ENTITY_TYPE = "brokers"
#: dynamic keys the connection limits (server/quotas.py) re-read when they change
CONNECTION_LIMIT_KEYS = frozenset({"max.connections", "max.connections.per.ip",
                                   "max.connections.per.ip.overrides"})


def entity_name(resource_name: str) -> str:
    """A BROKER resource's name as the stored entity: "" is the cluster default."""
    return resource_name or BROKER_DEFAULT_ENTITY


class DynamicBrokerConfigs:
    def __init__(self, config: BrokerConfig, backend: CoordinationBackend,
                 broker_id: int) -> None:
        self.config = config
        self.backend = backend
        self.broker_id = broker_id
        #: called with the names of keys whose effective value changed
        self.listeners: list[Callable[[set[str]], None]] = []
        #: the stored broker entities, as last seen: name -> configs (strings)
        self.stored: dict[str, dict[str, str]] = {}
        self._handle: WatchHandle | None = None

    async def start(self) -> None:
        self._handle = await self.backend.watch_entity_configs(ENTITY_TYPE, self._changed)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def entity(self, name: str) -> dict[str, str]:
        return dict(self.stored.get(name, {}))

    def _changed(self, entities: dict[str, dict[str, str]]) -> None:
        self.stored = {name: dict(c) for name, c in entities.items()}
        self._apply()

    def _apply(self) -> None:
        changed = self.config.set_dynamic(self.stored.get(BROKER_DEFAULT_ENTITY, {}),
                                          self.stored.get(str(self.broker_id), {}))
        if not changed:
            return
        log.info("dynamic broker configs changed: %s",
                 ", ".join(f"{n}={self.config[n]}" for n in sorted(changed)))
        for listener in self.listeners:
            try:
                listener(changed)
            except Exception:  # one part failing to follow must not stop the others
                log.exception("applying dynamic broker configs %s failed: this broker keeps "
                              "its previous values until restarted. " + BUG_REPORT, sorted(changed))

    @staticmethod
    def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
        """The configs to store, or KafkaError(INVALID_CONFIG) naming what is wrong:
        a key that cannot change at run time (Kafka's message), a null or bad value."""
        static = sorted(n for n in configs if _not_dynamic(n))
        if static:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Cannot update these configs dynamically: Set({', '.join(static)})")
        # Kafka's message for a broker config names no kind: "... supported for : name"
        return checked_configs(configs, parse_dynamic, "")

    async def alter(self, resource_name: str, configs: Mapping[str, str | None],
                    validate_only: bool = False) -> None:
        """Replace the stored configs of a broker ("" for the default) with `configs`;
        this broker applies them before returning, the others when their watch fires."""
        checked = self.validate(configs)
        if validate_only:
            return
        name = entity_name(resource_name)
        await self.backend.set_entity_configs(ENTITY_TYPE, name, checked)
        log.info("dynamic configs of broker entity %s set to %s", name, checked)
        self.stored[name] = checked
        self._apply()


def _not_dynamic(name: str) -> bool:
    return name not in DYNAMIC_BROKER_KEYS or name not in BY_NAME
