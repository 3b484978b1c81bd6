"""Truncated, corrupted and hostile request frames raise MalformedRequestError, quickly."""

from __future__ import annotations

import random
import time

import pytest

from pybroker.protocol import (
    Api,
    MalformedRequestError,
    ProtocolError,
    decode_request,
    encode_request,
)

from .examples import example, version_ids, versions

CASES = list(versions())


def _request(api: Api, version: int, seed: str) -> bytes:
    body = example(api.request, version, random.Random(seed), full=True)
    return b"".join(encode_request(api.key, version, 5, "cl", body))[4:]


@pytest.mark.parametrize(("api", "version"), CASES, ids=version_ids())
def test_every_truncation_is_malformed(api: Api, version: int) -> None:
    frame = _request(api, version, f"trunc-{api.key}-{version}")
    decode_request(frame)
    step = max(1, len(frame) // 400)
    for cut in range(0, len(frame), step):
        if api.key == 18 and version == 0 and cut == 8:
            continue  # an 8-byte ApiVersions v0 frame is a valid v0 header
        with pytest.raises(MalformedRequestError) as info:
            decode_request(memoryview(frame)[:cut])
        if cut >= 12:  # api key, version, correlation id and client id "cl" were readable
            assert info.value.header is not None
            assert info.value.header.api_key == api.key


@pytest.mark.parametrize(("api", "version"), CASES, ids=version_ids())
def test_corrupted_bodies_raise_only_protocol_errors(api: Api, version: int) -> None:
    rng = random.Random(f"corrupt-{api.key}-{version}")
    frame = _request(api, version, f"corrupt-{api.key}-{version}")
    body_start = 12
    for _ in range(150):
        data = bytearray(frame)
        for _ in range(rng.randint(1, 4)):
            if len(data) > body_start:
                data[rng.randrange(body_start, len(data))] = rng.choice([0x00, 0x7F, 0x80, 0xFF,
                                                                         rng.randrange(256)])
        try:
            decode_request(bytes(data))
        except ProtocolError:
            pass
    for _ in range(50):
        garbage = frame[:body_start] + rng.randbytes(rng.randint(0, 64))
        try:
            decode_request(garbage)
        except ProtocolError:
            pass


def _produce_v3_prefix() -> bytes:
    # header v1: key 0, version 3, correlation 1, client id "c"; transactional id null,
    # acks -1, timeout 1000
    return (b"\x00\x00\x00\x03\x00\x00\x00\x01\x00\x01c" + b"\xff\xff" + b"\xff\xff"
            + b"\x00\x00\x03\xe8")


@pytest.mark.parametrize("count", [b"\x7f\xff\xff\xff", b"\x10\x00\x00\x00", b"\x00\x00\x01\x00"])
def test_huge_array_count_in_tiny_frame(count: bytes) -> None:
    frame = _produce_v3_prefix() + count + b"\x00\x01t"
    start = time.perf_counter()
    with pytest.raises(MalformedRequestError, match="array"):
        decode_request(frame)
    assert time.perf_counter() - start < 1.0  # refused up front, not after allocating 2**31 entries


def test_huge_nested_array_count() -> None:
    frame = _produce_v3_prefix() + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x7f\xff\xff\xff"
    with pytest.raises(MalformedRequestError):
        decode_request(frame)


def test_huge_compact_array_count_fetch_v12() -> None:
    header = b"\x00\x01\x00\x0c\x00\x00\x00\x01\x00\x01c\x00"
    fixed = (b"\xff\xff\xff\xff" + b"\x00\x00\x01\xf4" + b"\x00\x00\x00\x01" + b"\x03\x20\x00\x00"
             + b"\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff")
    start = time.perf_counter()
    with pytest.raises(MalformedRequestError):
        decode_request(header + fixed + b"\xff\xff\xff\xff\x0f" + b"\x02t")
    with pytest.raises(MalformedRequestError):  # a varint that never ends
        decode_request(header + fixed + b"\xff" * 20)
    assert time.perf_counter() - start < 1.0  # refused up front, not after allocating 2**31 entries


@pytest.mark.parametrize("records_len", [b"\x7f\xff\xff\xff", b"\x00\x00\x00\x09"])
def test_records_length_past_end(records_len: bytes) -> None:
    frame = (_produce_v3_prefix() + b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01"
             + b"\x00\x00\x00\x00" + records_len + b"12345678")
    with pytest.raises(MalformedRequestError):
        decode_request(frame)


def test_string_length_past_end() -> None:
    frame = _produce_v3_prefix() + b"\x00\x00\x00\x01" + b"\x7f\xfft" + bytes(20)
    with pytest.raises(MalformedRequestError, match="string"):
        decode_request(frame)


def test_null_in_non_nullable_string() -> None:
    frame = _produce_v3_prefix() + b"\x00\x00\x00\x01" + b"\xff\xff" + b"\x00\x00\x00\x00"
    with pytest.raises(MalformedRequestError, match="null"):
        decode_request(frame)


def test_bad_utf8() -> None:
    frame = _produce_v3_prefix() + b"\x00\x00\x00\x01" + b"\x00\x02\xc3\x28" + b"\x00\x00\x00\x00"
    with pytest.raises(MalformedRequestError):
        decode_request(frame)
    with pytest.raises(MalformedRequestError):  # in the client id
        decode_request(b"\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\xc3\x28")


@pytest.mark.parametrize("frame", [b"", b"\x00", b"\x00\x00\x00\x03\x00\x00\x00",
                                   b"\x00\x00\x00\x03\x00\x00\x00\x01\x00",
                                   b"\x00\x00\x00\x03\x00\x00\x00\x01\x00\x05ab"])
def test_bad_headers(frame: bytes) -> None:
    with pytest.raises(MalformedRequestError):
        decode_request(frame)
