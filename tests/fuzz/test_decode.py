"""The request decoder under generated and mutated frames, every declared API and version.

(a) a mutated frame decodes to a body or raises one of the protocol's errors
    (MalformedRequestError, UnsupportedVersionError, UnknownApiError), quickly, and
    allocates memory in proportion to the bytes it was given, never to a length the
    frame claims; (b) a valid frame round-trips: it decodes to the body it was
    encoded from, and re-encodes to the same bytes. Whatever a mutated frame decodes
    to also survives a re-encode and decode unchanged.
"""

from __future__ import annotations

import random
import time
import tracemalloc
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis import given, note

from pybroker.protocol import (
    Api,
    MalformedRequestError,
    UnknownApiError,
    UnsupportedVersionError,
    decode_request,
    encode_request,
)
from pybroker.protocol.frame import request_decoder
from pybroker.protocol.types import uvarint_bytes

from .layout import layout
from .mutate import mutate
from .settings import fuzz_settings
from .strategies import declared_versions, request_frames

pytestmark = pytest.mark.fuzz

CASES = list(declared_versions())
IDS = [f"{api.name}-v{v}" for api, v in CASES]
PROTOCOL_ERRORS = (MalformedRequestError, UnsupportedVersionError, UnknownApiError)
#: a decode may take this much memory whatever the frame says...
ALLOC_BASE_BYTES = 64 * 1024
#: ...plus this much per byte of frame (a dict per 3-byte struct is ~80x)
ALLOC_PER_BYTE = 256
#: a hang, not a slow machine: decodes take microseconds
DECODE_MAX_S = 2.0
#: mutations of each generated request (generating is the slow part)
MUTATIONS_PER_EXAMPLE = 8


@pytest.fixture(scope="module", autouse=True)
def compiled_decoders() -> None:
    """Compile every decoder first: compiling allocates, decoding must not."""
    for api, version in CASES:
        request_decoder(api.key, version)


def normalize(value: Any) -> Any:
    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def decode_bounded(frame: bytes) -> tuple[Any, Any] | None:
    """Decode; None for a protocol error. Fails on any other exception, a slow decode
    or an allocation out of proportion to the frame."""
    tracemalloc.start()  # only around the decode: tracing slows generation fourfold
    start = time.perf_counter()
    try:
        result: tuple[Any, Any] | None = decode_request(frame)
    except PROTOCOL_ERRORS:
        result = None
    finally:
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert elapsed < DECODE_MAX_S, f"decoding {len(frame)} bytes took {elapsed:.2f}s"
    limit = ALLOC_BASE_BYTES + ALLOC_PER_BYTE * len(frame)
    assert peak <= limit, f"decoding {len(frame)} bytes allocated {peak} bytes"
    return result


def reencoded(header: Any, body: dict[str, Any]) -> bytes:
    parts = encode_request(header.api_key, header.api_version, header.correlation_id,
                           header.client_id, body)
    return b"".join(parts)[4:]


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
@fuzz_settings(examples=20)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_decoder(api: Api, version: int, data: st.DataObject, rng: random.Random) -> None:
    """One generated request: it round-trips; then its mutations decode or raise."""
    frame, body = data.draw(request_frames(api, version))
    header, decoded = decode_request(frame)
    assert (header.api_key, header.api_version) == (api.key, version)
    assert normalize(decoded) == body
    assert reencoded(header, decoded) == frame
    slots = layout(frame)
    donor = frame
    for _ in range(MUTATIONS_PER_EXAMPLE):
        mutated, how = mutate(frame, slots, rng, donor)
        note(f"mutations: {how}; frame: {mutated.hex()}")
        result = decode_bounded(mutated)
        if result is not None:
            # whatever decodes is a body the encoder writes back, and reads the same again
            header, decoded = result
            again = decode_request(reencoded(header, decoded))
            assert again[0] == header
            assert normalize(again[1]) == normalize(decoded)
        donor = mutated


def _with_length(frame: bytes, kind: str, offset: int, width: int, claimed: int) -> bytes:
    raw = claimed.to_bytes(4, "big") if kind == "len32" else uvarint_bytes(claimed + 1)
    return frame[:offset] + raw + frame[offset + width:]


@pytest.mark.parametrize("claimed", [2**31 - 1, 2**30, 2**20])
def test_claimed_lengths_do_not_allocate(claimed: int) -> None:
    """Every wide length of every empty request, claiming far more than the frame holds."""
    for api, version in CASES:
        frame = b"".join(encode_request(api.key, version, 1, "c", {}))[4:]
        for slot in layout(frame):
            if slot.kind in ("len32", "ulen"):
                lying = _with_length(frame, slot.kind, slot.offset, slot.width, claimed)
                decode_bounded(lying + bytes(16))


def test_allocation_check_catches_a_decoder_that_trusts_lengths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def trusting(frame: bytes) -> Any:
        return bytearray(int.from_bytes(frame[-4:], "big")), {}

    monkeypatch.setitem(globals(), "decode_request", trusting)
    with pytest.raises(AssertionError, match="allocated"):
        decode_bounded(b"\x00" * 12 + (2**24).to_bytes(4, "big"))
