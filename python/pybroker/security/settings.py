"""Per-listener security settings: Kafka's `listener.name.<listener>.<key>` form
over the broker-wide `<key>`.

The prefixed keys are not rows of the config table (their number is open-ended),
so they arrive among BrokerConfig's unknown keys; each is parsed with the type
of the key it overrides."""

from __future__ import annotations

from typing import Any

from pybroker.config import BY_NAME, BrokerConfig, parse_value


def prefixed(listener_name: str, key: str) -> str:
    """Kafka lower-cases the listener name in the prefix."""
    return f"listener.name.{listener_name.lower()}.{key}"


def listener_raw(config: BrokerConfig, listener_name: str, key: str) -> str | None:
    """The raw string of a per-listener key that has no broker-wide row
    (`<mechanism>.sasl.jaas.config`), or None."""
    value = config.unknown.get(prefixed(listener_name, key))
    return None if value is None else str(value)


def listener_value(config: BrokerConfig, listener_name: str, key: str) -> Any:
    """`listener.name.<l>.<key>` if set, else the broker-wide `key`."""
    raw = config.unknown.get(prefixed(listener_name, key))
    if raw is None:
        return config[key]
    return parse_value(BY_NAME[key], raw)


def listener_has(config: BrokerConfig, listener_name: str, key: str) -> bool:
    return prefixed(listener_name, key) in config.unknown
