"""Generate example bodies from the declarations, and compare decoded bodies."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from pybroker.protocol import APIS, Api, Field

STRINGS = ["", "t", "topic-0", "tøpic-é", "x" * 300, "grüppe"]


def versions() -> Iterator[tuple[Api, int]]:
    for api in sorted(APIS.values(), key=lambda a: a.key):
        for v in range(api.min_version, api.max_version + 1):
            yield api, v


def version_ids() -> list[str]:
    return [f"{api.name}-v{v}" for api, v in versions()]


def _primitive(rng: random.Random, typ: str) -> Any:
    if typ == "int8":
        return rng.randint(-128, 127)
    if typ == "int16":
        return rng.randint(-(2**15), 2**15 - 1)
    if typ == "uint16":
        return rng.randint(0, 2**16 - 1)
    if typ == "int32":
        return rng.choice([0, -1, 1, rng.randint(-(2**31), 2**31 - 1)])
    if typ == "uint32":
        return rng.randint(0, 2**32 - 1)
    if typ == "int64":
        return rng.choice([0, -1, rng.randint(-(2**63), 2**63 - 1)])
    if typ == "float64":
        return rng.random() * 1000
    if typ == "bool":
        return rng.random() < 0.5
    if typ == "uuid":
        return uuid.UUID(bytes=rng.randbytes(16))
    if typ == "string":
        return rng.choice(STRINGS)
    if typ in ("bytes", "records"):
        return rng.randbytes(rng.choice([0, 1, 7, 200]))
    if typ in ("varint", "varlong"):
        return rng.randint(-(2**31), 2**31)
    if typ == "uvarint":
        return rng.randint(0, 2**31)
    raise AssertionError(typ)


def example(
    fields: Sequence[Field], version: int, rng: random.Random, depth: int = 0, full: bool = False
) -> dict[str, Any]:
    """A body dict for ``version``: random values for present fields, defaults for others.

    ``full`` makes every array non-empty and every nullable value non-null (for
    truncation tests, where every byte should matter).
    """
    out: dict[str, Any] = {}
    for f in fields:
        if not f.present(version):
            out[f.name] = f.default(version)
            continue
        if f.is_nullable(version) and not full and rng.random() < 0.25:
            out[f.name] = None
            continue
        if f.is_struct:
            out[f.name] = example(f.fields, version, rng, depth + 1, full)
        elif f.is_array:
            n = rng.randint(1, 2) if full else rng.choice([0, 1, 2, 3])
            if f.is_struct_array:
                out[f.name] = [example(f.fields, version, rng, depth + 1, full) for _ in range(n)]
            else:
                out[f.name] = [_primitive(rng, f.element_type) for _ in range(n)]
        else:
            out[f.name] = _primitive(rng, f.type)
    return out


def normalize(value: Any) -> Any:
    """memoryview -> bytes, recursively, so decoded bodies compare with examples."""
    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value
