"""Fetch request bodies are decoded in Rust (_core.FetchRequestDecoder, issue 26): a
Fetch comes with every follower round trip and consumer poll, and the generated
decoder was the largest single line of the leader's loop after the handler. The
message stays declared once (protocol/messages/fetch.py); the Rust decoder must give
exactly what the decoder generated from it gives, at every version: the same dict
and end position for a well-formed body (tagged fields, unknown tags, topic ids
included), and a refusal wherever that decoder refuses (truncated or mutated bytes)."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from pybroker import _core
from pybroker.protocol import MalformedRequestError, decode_request, encode_request
from pybroker.protocol.codec import uuid_of
from pybroker.protocol.frame import body_decoder, request_decoder
from pybroker.protocol.messages import APIS
from pybroker.protocol.types import ZERO_UUID

from .examples import example

FETCH = APIS[1]
VERSIONS = list(range(FETCH.min_version, FETCH.max_version + 1))
#: what the generated decoder raises on bytes it cannot take (frame.py's _DECODE_ERRORS)
REFUSED = (MalformedRequestError, struct.error, IndexError, ValueError, OverflowError)


def _body(version: int, seed: str, full: bool = True,
          **fields: Any) -> tuple[bytes, int]:
    """A Fetch request frame (no size prefix) of a random body (with `fields` set), and
    where its body starts (after the header and, when flexible, its empty tagged
    fields)."""
    body = example(FETCH.request, version, random.Random(seed), full=full) | fields
    frame = b"".join(encode_request(1, version, 7, "cl", body))[4:]
    start = 12 + (1 if FETCH.is_flexible(version) else 0)
    return frame, start


def _outcome(decode: Any, buf: bytes, pos: int) -> tuple[str, Any]:
    try:
        return "ok", decode(buf, pos)
    except REFUSED:
        return "refused", None


@pytest.mark.parametrize("version", VERSIONS)
def test_the_same_body_as_the_generated_decoder(version: int) -> None:
    native = _core.FetchRequestDecoder(version, uuid_of, ZERO_UUID)
    generated = request_decoder(1, version)
    for n in range(40):
        frame, start = _body(version, f"native-{version}-{n}", full=n % 2 == 0)
        expected = generated(memoryview(frame), start)
        got = native(memoryview(frame), start)
        assert got == expected
        assert list(got[0]) == list(expected[0])  # the keys in the schema's order
        assert native(frame, start) == expected  # bytes as well as a memoryview


@pytest.mark.parametrize("version", [v for v in VERSIONS if FETCH.is_flexible(v)])
def test_unknown_and_known_tags_as_the_generated_decoder(version: int) -> None:
    """Tagged fields the version does not know are skipped by their size, a known one
    is read and the position set past its size, at the body and at every struct."""
    native = _core.FetchRequestDecoder(version, uuid_of, ZERO_UUID)
    generated = request_decoder(1, version)
    frame, start = _body(version, f"tags-{version}", full=False, cluster_id=None,
                         replica_state={"replica_id": -1, "replica_epoch": -1})
    # the body's own tagged fields are its last bytes: replace them with a run of
    # tags 0 (cluster_id), 1 (replica_state, known from v15), 5 (unknown) and a
    # cluster_id with two bytes of slack after its value
    tail = bytes([4,
                  0, 4, 4, ord("a"), ord("b"), ord("c"),
                  1, 13, *struct.pack(">iq", 3, 9), 0,
                  5, 2, 0xAA, 0xBB,
                  0, 4, 2, ord("z"), 0xEE, 0xEE])
    assert frame[-1] == 0
    tagged = frame[:-1] + tail
    expected = generated(memoryview(tagged), start)
    assert native(tagged, start) == expected
    assert expected[0]["cluster_id"] == "z"
    assert expected[1] == len(tagged)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_refused_by_both(version: int) -> None:
    native = _core.FetchRequestDecoder(version, uuid_of, ZERO_UUID)
    generated = request_decoder(1, version)
    frame, start = _body(version, f"cut-{version}")
    for cut in range(start, len(frame) + 1):
        piece = frame[:cut]
        want = _outcome(generated, piece, start)
        assert _outcome(native, piece, start) == want, cut
    assert _outcome(native, frame, len(frame) + 1)[0] == "refused"


@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_bodies_as_the_generated_decoder(version: int) -> None:
    """Bytes changed at random (lengths, counts, varints, UTF-8): both refuse, or both
    give the same body and end."""
    native = _core.FetchRequestDecoder(version, uuid_of, ZERO_UUID)
    generated = request_decoder(1, version)
    rng = random.Random(f"mutate-{version}")
    refused = 0
    for n in range(400):
        frame, start = _body(version, f"mutate-{version}-{n % 8}", full=n % 3 != 0)
        data = bytearray(frame)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(start, len(data))] = rng.choice(
                [0x00, 0x01, 0x7F, 0x80, 0xFF, 0xC3, rng.randrange(256)])
        want = _outcome(generated, bytes(data), start)
        assert _outcome(native, bytes(data), start) == want, bytes(data).hex()
        refused += want[0] == "refused"
    assert 0 < refused < 400  # both kinds of outcome were compared


def test_decode_request_takes_the_native_decoder() -> None:
    assert isinstance(body_decoder(1, 12), _core.FetchRequestDecoder)
    frame, _ = _body(12, "frame")
    header, body = decode_request(frame)
    assert header.api_key == 1
    assert body == request_decoder(1, 12)(memoryview(frame), 13)[0]
    with pytest.raises(MalformedRequestError) as info:
        decode_request(frame[:-3])
    assert info.value.header == header
    with pytest.raises(ValueError, match="v18"):
        _core.FetchRequestDecoder(18, uuid_of, ZERO_UUID)
