"""Group configs (Kafka 4.0's GroupConfig, KIP-848 / KIP-932): per-group overrides of
the consumer and share group session, heartbeat and record-lock settings. Changed
with IncrementalAlterConfigs on a GROUP resource (`kafka-configs.sh --entity-type
groups`), shown by DescribeConfigs (every key, an override's source
DYNAMIC_GROUP_CONFIG, else the broker's default), stored in the coordination store as
the entity "groups/<group id>" and followed by every broker through its watch.

A group's name needs no group to exist, as in Kafka. The consumer group coordinator
reads `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` of a group
through `effective()`; the share.* keys are accepted and shown for Kafka's tools (no
share groups here)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pybroker.config import BrokerConfig, ConfigType
from pybroker.coordination.base import CoordinationBackend, WatchHandle
from pybroker.errors import BUG_REPORT, ErrorCode, KafkaError

log = logging.getLogger(__name__)

ENTITY_TYPE = "groups"


@dataclass(frozen=True)
class GroupConfigKey:
    name: str
    type: ConfigType
    doc: str
    #: the broker key whose value is the default (a synonym), else `default`
    broker_default: str | None = None
    default: int | str | None = None
    #: bounds: broker keys (or fixed values) a value must lie within, inclusive
    minimum: str | int | None = None
    maximum: str | int | None = None
    choices: tuple[str, ...] | None = None


INT, STR = ConfigType.INT, ConfigType.STRING
#: Kafka 4.0's GroupConfig keys. The share group bounds are Kafka's defaults of its
#: group.share.* broker keys, which pybroker does not have.
GROUP_CONFIGS: tuple[GroupConfigKey, ...] = (
    GroupConfigKey("consumer.session.timeout.ms", INT,
                   "The timeout to detect client failures when using the consumer group "
                   "protocol.", broker_default="group.consumer.session.timeout.ms",
                   minimum="group.consumer.min.session.timeout.ms",
                   maximum="group.consumer.max.session.timeout.ms"),
    GroupConfigKey("consumer.heartbeat.interval.ms", INT,
                   "The heartbeat interval given to the members of a consumer group.",
                   broker_default="group.consumer.heartbeat.interval.ms",
                   minimum="group.consumer.min.heartbeat.interval.ms",
                   maximum="group.consumer.max.heartbeat.interval.ms"),
    GroupConfigKey("share.session.timeout.ms", INT,
                   "The timeout to detect client failures when using the share group "
                   "protocol.", default=45000, minimum=45000, maximum=60000),
    GroupConfigKey("share.heartbeat.interval.ms", INT,
                   "The heartbeat interval given to the members of a share group.",
                   default=5000, minimum=5000, maximum=15000),
    GroupConfigKey("share.record.lock.duration.ms", INT,
                   "The record acquisition lock duration in milliseconds for share groups.",
                   default=30000, minimum=15000, maximum=60000),
    GroupConfigKey("share.auto.offset.reset", STR,
                   "The strategy to initialize the share-partition start offset.",
                   default="latest", choices=("latest", "earliest")),
)
GROUP_KEYS: dict[str, GroupConfigKey] = {k.name: k for k in GROUP_CONFIGS}


class GroupConfigs:
    """The stored group configs, as last seen through the store's watch."""

    def __init__(self, config: BrokerConfig, backend: CoordinationBackend) -> None:
        self.config = config
        self.backend = backend
        #: group id -> its overrides (strings, as stored)
        self.stored: dict[str, dict[str, str]] = {}
        #: called with the ids of groups whose overrides changed
        self.listeners: list[Callable[[set[str]], None]] = []
        self._handle: WatchHandle | None = None

    async def start(self) -> None:
        self._handle = await self.backend.watch_entity_configs(ENTITY_TYPE, self._changed)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _changed(self, entities: dict[str, dict[str, str]]) -> None:
        before = self.stored
        self.stored = {name: dict(c) for name, c in entities.items()}
        self._notify({g for g in before.keys() | self.stored.keys()
                      if before.get(g) != self.stored.get(g)})

    def _notify(self, groups: set[str]) -> None:
        for listener in self.listeners if groups else ():
            try:
                listener(groups)
            except Exception:  # one part failing to follow must not stop the others
                log.exception("applying the group configs of %s failed: those groups keep "
                              "their previous configs on this broker. " + BUG_REPORT,
                              sorted(groups))

    def overrides(self, group: str) -> dict[str, str]:
        return dict(self.stored.get(group, {}))

    def default(self, key: GroupConfigKey) -> int | str | None:
        return self.config[key.broker_default] if key.broker_default else key.default

    def effective(self, group: str, name: str) -> int | str | None:
        """A group's value of `name`: its override, else the broker's default."""
        key = GROUP_KEYS[name]
        raw = self.stored.get(group, {}).get(name)
        return self.default(key) if raw is None else _parse(key, raw)

    def _bound(self, bound: str | int | None) -> int | None:
        return self.config[bound] if isinstance(bound, str) else bound

    def validate(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        """The overrides to store, or KafkaError(INVALID_CONFIG): an unknown name, a
        value of the wrong type, or outside the broker's bounds (Kafka's messages)."""
        checked: dict[str, str] = {}
        for name, raw in configs.items():
            key = GROUP_KEYS.get(name)
            if key is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
            if raw is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Null value not supported for group configs: {name}")
            value = _parse(key, raw)
            low, high = self._bound(key.minimum), self._bound(key.maximum)
            if isinstance(value, int) and low is not None and value < low:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"{name} must be greater than or equal to {key.minimum}")
            if isinstance(value, int) and high is not None and value > high:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"{name} must be less than or equal to {key.maximum}")
            checked[name] = str(value)
        return checked

    async def alter(self, group: str, configs: Mapping[str, str | None],
                    validate_only: bool = False) -> None:
        """Replace the group's stored overrides with `configs` (validated)."""
        if not group:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        checked = self.validate(configs)
        if validate_only:
            return
        await self.backend.set_entity_configs(ENTITY_TYPE, group, checked)
        log.info("configs of group %s set to %s", group, checked)
        changed = self.stored.get(group, {}) != checked
        if checked:
            self.stored[group] = checked
        else:
            self.stored.pop(group, None)
        if changed:
            self._notify({group})


def _parse(key: GroupConfigKey, raw: str) -> int | str:
    text = str(raw).strip()
    if key.type is ConfigType.INT:
        try:
            return int(text)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {raw} for configuration {key.name}: "
                             "Not a number of type INT") from None
    if key.choices and text.lower() not in key.choices:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"Invalid value {raw} for configuration {key.name}: "
                         f"String must be one of: {', '.join(key.choices)}")
    return text.lower() if key.choices else text
