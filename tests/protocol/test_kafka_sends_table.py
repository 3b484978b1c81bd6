"""Every nullable or defaulted response field of every advertised API version says what
Kafka's broker sends there (tests/protocol/kafka_sends.py), so a new API or field cannot
leave one to a default that no test reads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pybroker.handlers  # noqa: F401  (registers the handlers: the advertised table)
from pybroker.handlers.registry import HANDLERS
from pybroker.protocol import APIS, Field

from .kafka_sends import TABLE


def _walk(fields: Sequence[Field], version: int, path: str = "") -> Iterator[tuple[str, Field]]:
    for f in fields:
        if not f.present(version):
            continue
        name = f"{path}{f.name}"
        yield name, f
        if f.fields:
            yield from _walk(f.fields, version, f"{name}.")


def loose_fields() -> dict[tuple[str, str], list[int]]:
    """(api name, field path) -> advertised versions where the field is nullable or has a
    declared default."""
    found: dict[tuple[str, str], list[int]] = {}
    for key, spec in HANDLERS.items():
        api = APIS[key]
        for version in range(spec.min_version, spec.max_version + 1):
            for path, f in _walk(api.response, version):
                if f.is_nullable(version) or f.has_declared_default:
                    found.setdefault((api.name, path), []).append(version)
    return found


def test_every_loose_response_field_says_what_kafka_sends() -> None:
    missing = sorted(set(loose_fields()) - set(TABLE))
    assert not missing, (
        "nullable or defaulted response fields with no entry in tests/protocol/kafka_sends.py "
        f"(read Kafka's handler and say what it puts there): {missing}")


def test_every_entry_names_such_a_field() -> None:
    stale = sorted(set(TABLE) - set(loose_fields()))
    assert not stale, f"entries naming no nullable or defaulted advertised field: {stale}"


def test_every_entry_says_what_kafka_sends() -> None:
    assert all(rule.kafka.strip() for rule in TABLE.values())
