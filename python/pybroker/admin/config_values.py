"""Checking the values of an alter/create-configs request, for topics and for brokers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pybroker.config import ConfigError
from pybroker.errors import ErrorCode, KafkaError


def checked_configs(configs: Mapping[str, str | None], parse: Callable[[str, str], Any],
                    what: str) -> dict[str, str]:
    """The configs to store, each value checked by `parse(name, value)`; else
    KafkaError(INVALID_CONFIG): for a null value (Kafka's message names `what`, the
    kind of config) or a value `parse` refuses with ConfigError."""
    checked: dict[str, str] = {}
    for name, value in configs.items():
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Null value not supported for {what}: {name}")
        try:
            parse(name, value)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc
        checked[name] = value
    return checked
