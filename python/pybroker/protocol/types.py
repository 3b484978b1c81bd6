"""Primitive wire types of the Kafka protocol and the varint helpers.

Fixed-width types map to a struct format code and are packed in runs by the
codec. Variable-size types (string, bytes, records, arrays) have a classic
form (int16/int32 length, -1 = null) and a *compact* form used in flexible
versions (unsigned varint of length + 1, 0 = null). Flexible structs end with
a tagged-field section: uvarint count, then (uvarint tag, uvarint size, data).

Python values: ints for integer types, float for float64, bool, ``uuid.UUID`` for
uuid (the one type of topic ids past the codec: nothing else converts them),
``str`` for string, ``bytes`` for bytes, ``memoryview`` (on
decode) for records, lists for arrays, dicts for structs.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from pybroker.protocol.errors import MalformedRequestError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")


#: the null topic id (Kafka's Uuid.ZERO_UUID)
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class FixedType:
    """A fixed-width primitive: struct format code, size in bytes, zero value."""

    name: str
    code: str
    size: int
    zero: object


FIXED: dict[str, FixedType] = {
    t.name: t
    for t in (
        FixedType("int8", "b", 1, 0),
        FixedType("int16", "h", 2, 0),
        FixedType("uint16", "H", 2, 0),
        FixedType("int32", "i", 4, 0),
        FixedType("uint32", "I", 4, 0),
        FixedType("int64", "q", 8, 0),
        FixedType("float64", "d", 8, 0.0),
        FixedType("bool", "?", 1, False),
        FixedType("uuid", "16s", 16, ZERO_UUID),
    )
}

# Variable-size primitives and their zero (non-null default) values.
VARIABLE: dict[str, object] = {
    "string": "",
    "bytes": b"",
    "records": None,
    "varint": 0,
    "varlong": 0,
    "uvarint": 0,
}

PRIMITIVES = frozenset(FIXED) | frozenset(VARIABLE)


def read_uvarint(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint at ``pos`` (at most 10 bytes); returns (value, new pos)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise MalformedRequestError("varint too long")


def read_varint(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    """Zigzag-encoded signed varint/varlong; returns (value, new pos)."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def uvarint_bytes(value: int) -> bytes:
    """Unsigned varint encoding of a non-negative int."""
    if value < 0:
        raise ValueError("uvarint of a negative number")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_bytes(value: int) -> bytes:
    """Zigzag signed varint (64-bit range) encoding."""
    return uvarint_bytes((value << 1) ^ (value >> 63))
