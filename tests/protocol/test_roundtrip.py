"""Every API at every declared version: request and response bodies survive a round trip."""

from __future__ import annotations

import random

import pytest

from pybroker.protocol import (
    APIS,
    Api,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from .examples import example, normalize, version_ids, versions

CASES = list(versions())


def _frame(parts: list) -> bytes:
    assert all(isinstance(p, bytes) for p in parts)
    data = b"".join(parts)
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    return data


@pytest.mark.parametrize(("api", "version"), CASES, ids=version_ids())
@pytest.mark.parametrize("seed", range(8))
def test_request_roundtrip(api: Api, version: int, seed: int) -> None:
    rng = random.Random(f"req-{api.key}-{version}-{seed}")
    body = example(api.request, version, rng, full=seed == 0)
    frame = _frame(encode_request(api.key, version, 42, "client-ø", body))
    header, decoded = decode_request(memoryview(frame)[4:])
    assert header == (api.key, version, 42, "client-ø")
    assert normalize(decoded) == body


@pytest.mark.parametrize(("api", "version"), CASES, ids=version_ids())
@pytest.mark.parametrize("seed", range(8))
def test_response_roundtrip(api: Api, version: int, seed: int) -> None:
    rng = random.Random(f"resp-{api.key}-{version}-{seed}")
    body = example(api.response, version, rng, full=seed == 0)
    if api.key == 18:
        body["error_code"] = 0  # decode_response reads an ApiVersions error body as v0
    frame = _frame(encode_response(api.key, version, 7, body))
    correlation_id, decoded = decode_response(api.key, version, frame[4:])
    assert correlation_id == 7
    assert normalize(decoded) == body


@pytest.mark.parametrize(("api", "version"), CASES, ids=version_ids())
def test_missing_keys_take_defaults(api: Api, version: int) -> None:
    """An empty dict encodes (every field defaulted) and decodes to the defaults."""
    frame = _frame(encode_response(api.key, version, 1, {"unknown_extra_key": 5}))
    _, decoded = decode_response(api.key, version, frame[4:])
    assert decoded == {f.name: f.default(version) for f in api.response}
    frame = _frame(encode_request(api.key, version, 1, None, {}))
    header, decoded = decode_request(frame[4:])
    assert header.client_id is None
    assert decoded == {f.name: f.default(version) for f in api.request}


def test_registry_covers_the_brief() -> None:
    expected = {
        0: (0, 10), 1: (4, 17), 2: (1, 7), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 2),
        11: (0, 5), 12: (0, 3), 13: (0, 3), 14: (0, 3), 15: (0, 4), 16: (0, 5), 18: (0, 4),
        19: (2, 7), 20: (1, 6), 21: (0, 1), 22: (0, 4), 23: (2, 3), 24: (0, 3), 25: (0, 3),
        26: (0, 3), 27: (1, 1), 28: (0, 3), 32: (1, 3), 33: (0, 1), 37: (0, 1), 42: (0, 1),
        44: (0, 0), 35: (1, 4), 47: (0, 0), 60: (0, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1),
        68: (0, 1), 69: (0, 0), 75: (0, 0),
        17: (0, 1), 36: (0, 2), 50: (0, 0), 51: (0, 0),  # security (issue 16)
        29: (1, 3), 30: (1, 3), 31: (1, 3), 48: (0, 1), 49: (0, 1),
        # issue 15: ControlledShutdown, ElectLeaders, Alter/ListPartitionReassignments
        7: (1, 3), 43: (0, 2), 45: (0, 0), 46: (0, 0),
    }
    assert {k: (a.min_version, a.max_version) for k, a in APIS.items()} == expected
    flexible = {(k, v) for k, a in APIS.items() for v in range(a.min_version, a.max_version + 1)
                if a.is_flexible(v)}
    assert flexible == {(0, 9), (0, 10), (2, 6), (2, 7), (18, 3), (18, 4), (28, 3),
                        (8, 8), (8, 9), (9, 6), (9, 7), (9, 8), (9, 9), (16, 3), (16, 4),
                        (16, 5), (68, 0), (68, 1), (69, 0), (75, 0),
                        (35, 2), (35, 3), (35, 4), (60, 0), (60, 1),
                        (22, 2), (22, 3), (22, 4), (24, 3), (25, 3), (26, 3), (27, 1), (61, 0),
                        (65, 0), (66, 0), (66, 1)} | \
        {(1, v) for v in range(12, 18)} | {(3, v) for v in range(9, 14)} | \
        {(19, v) for v in range(5, 8)} | {(20, v) for v in range(4, 7)} | \
        {(36, 2), (50, 0), (51, 0), (48, 1), (49, 1),  # security (issue 16)
         (29, 2), (29, 3), (30, 2), (30, 3), (31, 2), (31, 3)} | \
        {(7, 3), (43, 2), (45, 0), (46, 0)}
    assert not APIS[0].is_flexible(8) and APIS[0].is_flexible(9)
