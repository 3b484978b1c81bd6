"""Hypothesis strategies for request frames, derived from the message declarations.

Every field's strategy follows from its declared type (integers within the type's
range, text, binary, lists of structs, None where the version makes it nullable);
a few field names steer values toward the states that matter, so generated
requests reach real partitions, groups and configs instead of failing lookups:
topic fields often name the broker's playground topics, group fields its groups,
config fields real topic config keys, records fields real v2 record batches.
Nothing names the data the tests check afterwards, so fuzzed requests cannot
delete or reconfigure it except through a bug.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

import pybroker.handlers  # noqa: F401  (registers the handlers)
from pybroker import _core
from pybroker.config import TOPIC_KEYS
from pybroker.handlers.registry import HANDLERS
from pybroker.protocol import APIS, Api, Field, encode_request

from .mutate import INT_RANGES


@dataclass(frozen=True)
class Names:
    """The existing things generated requests may name."""

    topics: tuple[str, ...] = ("fz-a", "fz-b")
    groups: tuple[str, ...] = ("fz-group",)
    #: a live member of the first group, its generation (state.establish)
    members: tuple[str, ...] = ()
    generations: tuple[int, ...] = ()
    #: (producer id, epoch) pairs from InitProducerId
    producers: tuple[tuple[int, int], ...] = ()


PLAYGROUND = Names()

#: (parent array, field) or field -> the pool its strings come from
TOPIC_FIELDS = {"topic", "topic_names", "resource_name", ("topics", "name"),
                ("topic_data", "name"), ("v3_and_below_topics", "name")}
GROUP_FIELDS = {"group_id", "groups", "groups_names", "key"}
CONFIG_VALUES = ("0", "1", "-1", "100", "1048576", "delete", "compact", "compact,delete",
                 "CreateTime", "LogAppendTime", "true", "")
SMALL_INTS = (-1, 0, 1, 2, 3)
#: int field -> values worth trying first (then the whole range)
INT_HINTS: dict[str, tuple[int, ...]] = {
    "acks": (-1, 0, 1),
    "max_wait_ms": (0, 10, 100),
    "min_bytes": (0, 1, 1 << 20),
    "session_timeout_ms": (6000, 10000, 30000),
    "rebalance_timeout_ms": (1000, 6000, 30000),
    "resource_type": (2, 4, 8),
    "key_type": (0, 1),
    "isolation_level": (0, 1),
    "config_operation": (0, 1, 2, 3),
}
#: partition counts: small or absurd, never in between (a legal request for
#: 5000 partitions only costs this test time and file descriptors)
COUNT_FIELDS = {"num_partitions", "count"}
GENERATION_FIELDS = {"generation_id", "generation_id_or_member_epoch"}
COUNT_EXTREMES = (-(2**31), -2, 10001, 2**31 - 1)


def _int(typ: str, name: str, names: Names) -> st.SearchStrategy[int]:
    lo, hi, _ = INT_RANGES[typ]
    if name in COUNT_FIELDS:
        return st.integers(-1, 4) | st.sampled_from(COUNT_EXTREMES)
    first = INT_HINTS.get(name, SMALL_INTS)
    if name in GENERATION_FIELDS:
        first = names.generations + SMALL_INTS
    elif name == "producer_id" and names.producers:
        first = tuple(p for p, _ in names.producers) + SMALL_INTS
    elif name == "producer_epoch" and names.producers:
        first = tuple(e for _, e in names.producers) + SMALL_INTS
    return st.sampled_from([v for v in first if lo <= v <= hi]) | st.integers(lo, hi)


def _batches(names: Names) -> st.SearchStrategy[bytes]:
    """One or two uncompressed v2 batches built by the project's own encoder, some
    from a known idempotent producer (id, epoch and a small first sequence)."""
    record = st.tuples(st.none() | st.binary(max_size=8), st.none() | st.binary(max_size=48))
    batch = st.builds(
        lambda recs, ts: _core.build_batch([k for k, _ in recs], [v for _, v in recs], ts),
        st.lists(record, min_size=1, max_size=3), st.integers(0, 2**42))
    if names.producers:
        idempotent = st.builds(_as_producer, batch, st.sampled_from(names.producers),
                               st.integers(-1, 6))
        batch = batch | idempotent
    return st.lists(batch, min_size=1, max_size=2).map(b"".join)


def _as_producer(batch: bytes, producer: tuple[int, int], sequence: int) -> bytes:
    """``batch`` written by ``producer`` from ``sequence`` on, its CRC made right again."""
    out = bytearray(batch)
    struct.pack_into(">qhi", out, 43, producer[0], producer[1], sequence)
    struct.pack_into(">I", out, 17, _core.crc32c(bytes(out[21:])))
    return bytes(out)


def _string(parent: str, name: str, names: Names) -> st.SearchStrategy[str]:
    text = st.text(max_size=12)
    if name in TOPIC_FIELDS or (parent, name) in TOPIC_FIELDS:
        valid = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True)
        return st.sampled_from(names.topics) | valid | text
    if name in GROUP_FIELDS:
        return st.sampled_from(names.groups) | text
    if name == "member_id" and names.members:
        return st.sampled_from(names.members) | text
    if (parent, name) == ("configs", "name") or name == "configuration_keys":
        return st.sampled_from(sorted(TOPIC_KEYS)) | text
    if (parent, name) == ("configs", "value"):
        return st.sampled_from(CONFIG_VALUES) | text
    if name == "protocol_type":
        return st.just("consumer") | text
    return text


def _primitive(typ: str, parent: str, name: str, names: Names) -> st.SearchStrategy[Any]:
    if typ in INT_RANGES:
        return _int(typ, name, names)
    if typ == "bool":
        return st.booleans()
    if typ == "float64":
        return st.floats(allow_nan=False)
    if typ == "uuid":  # the codec's one id type (raw bytes are refused)
        return st.uuids(allow_nil=True)
    if typ == "string":
        return _string(parent, name, names)
    if typ == "bytes":
        return st.binary(max_size=32)
    if typ == "records":
        return _batches(names) | st.binary(max_size=64)
    if typ == "uvarint":
        return st.integers(0, 2**63 - 1)
    return st.integers(-(2**63), 2**63 - 1)  # varint, varlong


def _field(f: Field, version: int, parent: str, names: Names) -> st.SearchStrategy[Any]:
    if not f.present(version):
        return st.just(f.default(version))
    if f.is_struct:
        value: st.SearchStrategy[Any] = struct_bodies(f.fields, version, f.name, names)
    elif f.is_struct_array:
        value = st.lists(struct_bodies(f.fields, version, f.name, names), max_size=3)
    elif f.is_array:
        value = st.lists(_primitive(f.element_type, parent, f.name, names), max_size=4)
    else:
        value = _primitive(f.type, parent, f.name, names)
    if f.is_nullable(version):
        value = st.none() | value
    return value


def struct_bodies(fields: tuple[Field, ...], version: int, parent: str = "",
                  names: Names = PLAYGROUND) -> st.SearchStrategy[dict[str, Any]]:
    """A body dict holding every declared field (defaults where absent in ``version``)."""
    return st.fixed_dictionaries({f.name: _field(f, version, parent, names) for f in fields})


def request_bodies(api: Api, version: int,
                   names: Names = PLAYGROUND) -> st.SearchStrategy[dict[str, Any]]:
    return struct_bodies(api.request, version, "", names)


def encode_frame(api: Api, version: int, correlation_id: int, client_id: str | None,
                 body: dict[str, Any]) -> bytes:
    """The request frame without its size prefix, as ``decode_request`` takes it."""
    return b"".join(encode_request(api.key, version, correlation_id, client_id, body))[4:]


@st.composite
def request_frames(draw: st.DrawFn, api: Api, version: int,
                   names: Names = PLAYGROUND) -> tuple[bytes, dict[str, Any]]:
    """(frame without size prefix, the body it encodes)."""
    body = draw(request_bodies(api, version, names))
    correlation_id = draw(st.integers(-(2**31), 2**31 - 1))
    client_id = draw(st.none() | st.text(max_size=8))
    return encode_frame(api, version, correlation_id, client_id, body), body


def declared_versions() -> Iterator[tuple[Api, int]]:
    """Every (api, version) the declarations define."""
    for api in sorted(APIS.values(), key=lambda a: a.key):
        for version in range(api.min_version, api.max_version + 1):
            yield api, version


def advertised_versions() -> Iterator[tuple[Api, int]]:
    """Every (api, version) the handlers registry advertises in ApiVersions."""
    for spec in sorted(HANDLERS.values(), key=lambda s: s.api_key):
        for version in range(spec.min_version, spec.max_version + 1):
            yield APIS[spec.api_key], version
