"""Cheap mutations of a valid request frame, guided by its layout.

``mutate(frame, slots, rng)`` applies one to three mutations and returns the new
bytes with the names of what it did. Slot mutations (hostile lengths and counts,
boundary integers, bogus tagged fields, a wrong api key or version, record batches
changed behind a recomputed CRC, compression bombs) run first,
from the last slot to the first, so a mutation that changes a width never moves a
slot still to be mutated; byte mutations (bit flips, truncation, extension,
insertion, deletion, duplication, splicing) follow. Everything is driven by one
``random.Random``: the Hypothesis tests pass ``st.randoms()`` (so failures shrink
and replay), the live run a seeded one. Pure Python on small frames: tens of
microseconds a mutation.
"""

from __future__ import annotations

import functools
import gzip
import random
import struct
from collections.abc import Callable, Sequence

import zstandard

from pybroker import _core
from pybroker.protocol import APIS
from pybroker.protocol.types import read_uvarint, uvarint_bytes

from .layout import LENGTH_KINDS, Slot

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1, ">b"),
    "int16": (-(2**15), 2**15 - 1, ">h"),
    "uint16": (0, 2**16 - 1, ">H"),
    "int32": (-(2**31), 2**31 - 1, ">i"),
    "uint32": (0, 2**32 - 1, ">I"),
    "int64": (-(2**63), 2**63 - 1, ">q"),
}
DECLARED_KEYS = sorted(APIS)
#: api keys nobody declares (holes in Kafka's numbering, negative, far out)
UNKNOWN_KEYS = (-1, -32768, 4, 17, 27, 31, 1000, 32767)
#: raw varints the decoder must reject or bound: 10 x 0xff then 1 (too long),
#: never-ending, and the largest 64-bit values
HOSTILE_VARINTS = (b"\xff" * 10 + b"\x01", b"\x80" * 12, b"\xff" * 9 + b"\x01",
                   b"\xfe" * 9 + b"\x01")

#: record batch v2 header fields: name -> (offset, struct format)
BATCH_FIELDS = {
    "batch_length": (8, ">i"), "magic": (16, ">b"), "attributes": (21, ">h"),
    "last_offset_delta": (23, ">i"), "base_timestamp": (27, ">q"),
    "max_timestamp": (35, ">q"), "producer_id": (43, ">q"), "producer_epoch": (51, ">h"),
    "base_sequence": (53, ">i"), "record_count": (57, ">i"),
}
BATCH_HEADER_BYTES = 61
CRC_AT, CRC_FROM = 17, 21
#: what a compression bomb inflates to (the broker's bound is 256 MiB)
BOMB_BYTES = 1 << 30

Mutator = Callable[[bytearray, Slot | None, random.Random, bytes | None], str]


def _set_int(data: bytearray, slot: Slot, fmt: str, value: int) -> None:
    struct.pack_into(fmt, data, slot.offset, value)


def hostile_length(data: bytearray, slot: Slot | None, rng: random.Random,
                   _donor: bytes | None) -> str:
    """A length or count that lies: null, negative, huge, off by one, past the end."""
    assert slot is not None
    remaining = len(data) - slot.offset - slot.width
    if slot.kind == "ulen":
        current, _ = read_uvarint(data, slot.offset)
        pick = rng.randrange(8)
        if pick < 2:
            raw = rng.choice(HOSTILE_VARINTS)
        elif pick == 2:
            # the same value, overlong: legal for a varint reader, confusing for others
            raw = bytes([(current & 0x7F) | 0x80, 0x80, 0x00])
        else:
            n = rng.choice([-1, 2**31 - 1, 2**32, 2**63, 2**64 - 2, current, current - 2,
                            remaining + 1, rng.randrange(2**20)])
            raw = uvarint_bytes(max(n + 1, 0))
        data[slot.offset:slot.offset + slot.width] = raw
        return "ulen"
    if slot.kind == "len16":
        (current,) = struct.unpack_from(">h", data, slot.offset)
        value = rng.choice([-1, -2, -32768, 32767, current + 1, current - 1, 0,
                            min(remaining + 1, 32767)])
        _set_int(data, slot, ">h", max(-32768, min(32767, value)))
        return "len16"
    (current,) = struct.unpack_from(">i", data, slot.offset)
    value = rng.choice([-1, -2, -(2**31), 2**31 - 1, 2**30, 2**16, current + 1, current - 1,
                        0, remaining + 1, rng.randrange(2**31)])
    _set_int(data, slot, ">i", max(-(2**31), min(2**31 - 1, value)))
    return "len32"


def boundary_int(data: bytearray, slot: Slot | None, rng: random.Random,
                 _donor: bytes | None) -> str:
    """An integer field at its type's edges (or -1, 0, 1)."""
    assert slot is not None
    lo, hi, fmt = INT_RANGES[slot.type]
    value = rng.choice([lo, hi, lo + 1, hi - 1, 0, 1, max(lo, -1), rng.randint(lo, hi)])
    _set_int(data, slot, fmt, value)
    return f"int:{slot.type}"


def bogus_tags(data: bytearray, slot: Slot | None, rng: random.Random,
               _donor: bytes | None) -> str:
    """Extra tagged fields: unknown or huge tags, sizes past the end, empty known tags."""
    assert slot is not None
    count, after = read_uvarint(data, slot.offset)
    if rng.random() < 0.2:
        # a count that can never be satisfied
        data[slot.offset:after] = uvarint_bytes(rng.choice([2**31, 2**32 + 1, 2**63]))
        return "tags:count"
    extra = bytearray()
    k = rng.randint(1, 3)
    for _ in range(k):
        tag = rng.choice([0, 1, 2, 3, 99, 2**31, 2**63])
        pick = rng.randrange(4)
        if pick == 0:  # a plausible unknown/known tag with a small payload
            payload = rng.randbytes(rng.randint(0, 8))
            extra += uvarint_bytes(tag) + uvarint_bytes(len(payload)) + payload
        elif pick == 1:  # size past the end of the frame
            extra += uvarint_bytes(tag) + uvarint_bytes(rng.choice([2**31, 2**62, 1000]))
        elif pick == 2:  # zero size: a known tag's value must not be read from beyond it
            extra += uvarint_bytes(tag) + b"\x00"
        else:
            extra += uvarint_bytes(tag) + rng.choice(HOSTILE_VARINTS)
    data[slot.offset:after] = uvarint_bytes(count + k) + extra
    return "tags"


def wrong_version(data: bytearray, slot: Slot | None, rng: random.Random,
                  _donor: bytes | None) -> str:
    """The body is read with another version's schema, or the version is unsupported."""
    assert slot is not None
    (key,) = struct.unpack_from(">h", data, 0)
    api = APIS.get(key)
    if api is not None and rng.random() < 0.6:
        version = rng.randint(api.min_version, api.max_version)
    else:
        version = rng.choice([-1, -32768, 32767, (api.max_version + 1) if api else 99,
                              (api.min_version - 1) if api else 0, rng.randrange(100)])
    _set_int(data, slot, ">h", version)
    return "api_version"


def wrong_key(data: bytearray, slot: Slot | None, rng: random.Random,
              _donor: bytes | None) -> str:
    """Another API's key (same bytes, other schema) or a key nobody declares."""
    assert slot is not None
    key = rng.choice(DECLARED_KEYS) if rng.random() < 0.6 else rng.choice(UNKNOWN_KEYS)
    _set_int(data, slot, ">h", key)
    return "api_key"


@functools.cache
def bombs() -> dict[int, bytes]:
    """codec -> a small records section that decompresses to BOMB_BYTES of zeros."""
    chunk = bytes(1 << 20)
    zstd = zstandard.ZstdCompressor(level=19).compressobj()
    out = b"".join(zstd.compress(chunk) for _ in range(BOMB_BYTES >> 20)) + zstd.flush()
    # gzip's ratio tops out near 1000:1: 64 MiB of zeros is ~64 KiB on the wire
    return {1: gzip.compress(bytes(64 << 20), 9), 4: out}


def record_batch(data: bytearray, slot: Slot | None, rng: random.Random,
                 _donor: bytes | None) -> str:
    """Change the first record batch inside a records field and make its CRC right
    again, so the batch reaches the checks behind the CRC: header fields at their
    edges, codec bits, record bytes, or a compression bomb."""
    assert slot is not None
    at, end = slot.offset, slot.offset + slot.width
    if slot.width < BATCH_HEADER_BYTES or data[at + 16] != 2:
        return bit_flips(data, None, rng, None)
    pick = rng.randrange(10)
    if pick < 5:
        name = rng.choice(sorted(BATCH_FIELDS))
        offset, fmt = BATCH_FIELDS[name]
        lo, hi, _ = INT_RANGES[{"b": "int8", "h": "int16", "i": "int32", "q": "int64"}[fmt[1]]]
        struct.pack_into(fmt, data, at + offset,
                         rng.choice([lo, hi, -1, 0, 1, 2, rng.randint(lo, hi)]))
        what = f"batch:{name}"
    elif pick < 7:
        codec = rng.randrange(8)
        (attributes,) = struct.unpack_from(">h", data, at + 21)
        struct.pack_into(">h", data, at + 21, (attributes & ~7) | codec)
        what = f"batch:codec{codec}"
    elif pick < 9 and slot.width > BATCH_HEADER_BYTES:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(at + BATCH_HEADER_BYTES, end)] = rng.randrange(256)
        what = "batch:records"
    elif slot.type == "len32":
        codec, body = rng.choice(sorted(bombs().items()))
        batch = bytearray(data[at:at + BATCH_HEADER_BYTES]) + body
        struct.pack_into(">i", batch, 8, len(batch) - 12)
        (attributes,) = struct.unpack_from(">h", batch, 21)
        struct.pack_into(">h", batch, 21, (attributes & ~7) | codec)
        struct.pack_into(">I", batch, CRC_AT, _core.crc32c(bytes(batch[CRC_FROM:])))
        data[at:end] = batch
        struct.pack_into(">i", data, at - 4, len(batch))
        return f"batch:bomb{codec}"
    else:
        return bit_flips(data, None, rng, None)
    (length,) = struct.unpack_from(">i", data, at + 8)
    crc_end = min(end, at + 12 + max(length, 0))
    if crc_end > at + CRC_FROM:
        struct.pack_into(">I", data, at + CRC_AT, _core.crc32c(bytes(data[at + CRC_FROM:crc_end])))
    return what


def bit_flips(data: bytearray, _slot: Slot | None, rng: random.Random,
              _donor: bytes | None) -> str:
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        if data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    return "bitflip"


def interesting_bytes(data: bytearray, _slot: Slot | None, rng: random.Random,
                      _donor: bytes | None) -> str:
    for _ in range(rng.randint(1, 4)):
        if data:
            data[rng.randrange(len(data))] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF])
    return "bytes"


def truncate(data: bytearray, _slot: Slot | None, rng: random.Random,
             _donor: bytes | None) -> str:
    if data:
        del data[rng.randrange(len(data)):]
    return "truncate"


def extend(data: bytearray, _slot: Slot | None, rng: random.Random,
           _donor: bytes | None) -> str:
    n = rng.choice([1, 4, 16, 64, 1024])
    data += rng.choice([bytes(n), b"\xff" * n, rng.randbytes(n)])
    return "extend"


def insert(data: bytearray, _slot: Slot | None, rng: random.Random,
           _donor: bytes | None) -> str:
    at = rng.randint(0, len(data))
    data[at:at] = rng.randbytes(rng.randint(1, 8))
    return "insert"


def delete(data: bytearray, _slot: Slot | None, rng: random.Random,
           _donor: bytes | None) -> str:
    if data:
        at = rng.randrange(len(data))
        del data[at:at + rng.randint(1, 8)]
    return "delete"


def duplicate(data: bytearray, _slot: Slot | None, rng: random.Random,
              _donor: bytes | None) -> str:
    """Repeat a chunk in place (array elements without their count updated)."""
    if data:
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.randint(1, 64))
        data[b:b] = data[a:b] * rng.randint(1, 4)
    return "duplicate"


def splice(data: bytearray, _slot: Slot | None, rng: random.Random,
           donor: bytes | None) -> str:
    """The tail of another request after this one's head."""
    if donor:
        cut = rng.randint(0, len(data))
        data[cut:] = donor[rng.randint(0, len(donor)):]
    return "splice"


#: slot kind -> mutator, weight
SLOT_MUTATORS: dict[str, tuple[Mutator, int]] = {
    **{kind: (hostile_length, 30) for kind in LENGTH_KINDS},
    "int": (boundary_int, 12),
    "tags": (bogus_tags, 10),
    "api_version": (wrong_version, 6),
    "api_key": (wrong_key, 2),
    "records": (record_batch, 150),
}
BYTE_MUTATORS: tuple[tuple[Mutator, int], ...] = (
    (bit_flips, 16), (interesting_bytes, 8), (truncate, 8), (extend, 6), (insert, 4),
    (delete, 4), (duplicate, 3), (splice, 3),
)
_BYTE_FNS = [m for m, _ in BYTE_MUTATORS]
_BYTE_WEIGHTS = [w for _, w in BYTE_MUTATORS]
#: share of mutation rounds that pick a slot (when the frame has slots)
SLOT_SHARE = 0.55


def mutate(frame: bytes, slots: Sequence[Slot], rng: random.Random,
           donor: bytes | None = None) -> tuple[bytes, list[str]]:
    """One to three mutations of ``frame``; returns (bytes, names of the mutations)."""
    rounds = 1 + (rng.random() < 0.3) + (rng.random() < 0.1)
    chosen: list[Slot] = []
    byte_rounds = 0
    for _ in range(rounds):
        if slots and rng.random() < SLOT_SHARE:
            weights = [SLOT_MUTATORS[s.kind][1] for s in slots]
            chosen.append(rng.choices(slots, weights)[0])
        else:
            byte_rounds += 1
    data = bytearray(frame)
    names = []
    for slot in sorted(set(chosen), key=lambda s: s.offset, reverse=True):
        names.append(SLOT_MUTATORS[slot.kind][0](data, slot, rng, donor))
    for _ in range(byte_rounds):
        names.append(rng.choices(_BYTE_FNS, _BYTE_WEIGHTS)[0](data, None, rng, donor))
    return bytes(data), names
