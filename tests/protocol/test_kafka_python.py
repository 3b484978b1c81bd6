"""Golden cross-checks against kafka-python's own protocol classes.

Our encoding of every request and response (every API, every declared version)
must decode with kafka-python's class for that message, give the same field
values under the same snake_case names, and re-encode there to identical bytes.
Whole request frames kafka-python builds (header included) must decode with ours.
"""

from __future__ import annotations

import importlib
import random
import uuid
from typing import Any

import pytest

from pybroker.protocol import Api, decode_request, encode_request, encode_response

from .examples import example, normalize, versions

kafka_protocol = pytest.importorskip("kafka.protocol.api_message")


def _kafka_classes() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for mod_name in ("producer", "consumer", "metadata", "admin", "sasl"):
        mod = importlib.import_module(f"kafka.protocol.{mod_name}")
        for attr in dir(mod):
            cls = getattr(mod, attr)
            if (isinstance(cls, type) and issubclass(cls, kafka_protocol.ApiMessage)
                    and getattr(cls, "_json", None) is not None):
                found[cls.name] = cls
    return found


KAFKA = _kafka_classes()
#: APIs the installed kafka-python declares (it has no KIP-848 messages, for one)
CASES = [(api, v) for api, v in versions() if api.name + "Request" in KAFKA]
CASE_IDS = [f"{api.name}-v{v}" for api, v in CASES]


def _plain(value: Any) -> Any:
    """kafka-python to_dict(json=False) values -> our representation."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _same(ours: Any, theirs: Any, path: str = "") -> None:
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), path
        for key, value in theirs.items():
            assert key in ours, f"kafka-python field {path}.{key} missing from our declaration"
            if value is None and isinstance(ours[key], dict):
                continue  # absent tagged struct: kafka-python says None, we fill defaults
            _same(ours[key], value, f"{path}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _same(a, b, f"{path}[{i}]")
    elif isinstance(theirs, uuid.UUID):  # both carry uuid.UUID
        assert ours == theirs, f"{path}: ours {ours!r} kafka-python {theirs}"
    elif isinstance(theirs, (set, frozenset)):
        assert isinstance(ours, int), path  # kafka-python's "bitfield"; bytes are compared too
    else:
        assert ours == theirs, f"{path}: ours {ours!r} kafka-python {theirs!r}"


def _kafka_python_renames(name: str, theirs: dict[str, Any]) -> dict[str, Any]:
    """kafka-python renames Metadata's and DescribeCluster's *_authorized_operations to
    ``authorized_operations``;
    we keep Kafka's schema names."""
    if name == "MetadataResponse":
        if "authorized_operations" in theirs:
            theirs["cluster_authorized_operations"] = theirs.pop("authorized_operations")
        for topic in theirs.get("topics") or ():
            if "authorized_operations" in topic:
                topic["topic_authorized_operations"] = topic.pop("authorized_operations")
    if name == "DescribeClusterResponse" and "authorized_operations" in theirs:
        theirs["cluster_authorized_operations"] = theirs.pop("authorized_operations")
    return theirs


def _check(cls: Any, version: int, body: dict[str, Any], wire: bytes) -> None:
    theirs = cls[version].decode(wire)
    _same(body, _kafka_python_renames(cls.name, _plain(theirs.to_dict(json=False))))
    theirs._header = None  # kafka-python's decode leaves it unset; some encode() overrides read it
    assert bytes(theirs.encode()) == wire


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("seed", range(4))
def test_request_matches_kafka_python(api: Api, version: int, seed: int) -> None:
    rng = random.Random(f"kp-req-{api.key}-{version}-{seed}")
    body = example(api.request, version, rng, full=seed == 0)
    frame = b"".join(encode_request(api.key, version, 9, "c", body))
    header_len = 4 + 2 + 2 + 4 + 2 + 1 + (1 if api.is_flexible(version) else 0)
    _check(KAFKA[api.name + "Request"], version, body, frame[header_len:])


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("seed", range(4))
def test_response_matches_kafka_python(api: Api, version: int, seed: int) -> None:
    rng = random.Random(f"kp-resp-{api.key}-{version}-{seed}")
    body = example(api.response, version, rng, full=seed == 0)
    if api.key == 18:
        body["error_code"] = 0  # with an error, clients read any ApiVersions body as v0
    frame = b"".join(encode_response(api.key, version, 9, body))
    header_len = 8 + (1 if api.response_header_version(version) == 1 else 0)
    _check(KAFKA[api.name + "Response"], version, body, frame[header_len:])


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
def test_kafka_python_request_frames_decode(api: Api, version: int) -> None:
    """kafka-python builds a framed request with its header; ours decodes it."""
    rng = random.Random(f"kp-frame-{api.key}-{version}")
    body = example(api.request, version, rng, full=True)
    ours = b"".join(encode_request(api.key, version, 1234, "kafka-python", body))
    cls = KAFKA[api.name + "Request"]
    theirs = cls[version].decode(ours[4 + 8 + 2 + 12 + (1 if api.is_flexible(version) else 0):])
    theirs.with_header(correlation_id=1234, client_id="kafka-python")
    frame = bytes(theirs.encode(header=True, framed=True))
    header, decoded = decode_request(memoryview(frame)[4:])
    assert header == (api.key, version, 1234, "kafka-python")
    assert normalize(decoded) == body
    assert frame == ours


def test_produce_v0_to_v2_layout() -> None:
    """kafka-python's schema (like Kafka 4's) starts Produce at v3; v0-2 share v3's layout
    without transactional_id; v1 adds throttle_time_ms, v2 log_append_time_ms."""
    body = {"acks": 1, "timeout_ms": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 2, "records": b"rec"}]}]}
    v0 = b"".join(encode_request(0, 0, 1, "c", body))
    v3 = b"".join(encode_request(0, 3, 1, "c", {**body, "transactional_id": None}))
    assert v0[15:] == v3[17:]
    partition = {"index": 2, "error_code": 0, "base_offset": 10, "log_append_time_ms": 77}
    resp = {"responses": [{"name": "t", "partition_responses": [partition]}],
            "throttle_time_ms": 3}
    r0, r1, r2 = (b"".join(encode_response(0, v, 1, resp))[8:] for v in (0, 1, 2))
    assert r0 == (b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01"
                  + b"\x00\x00\x00\x02" + b"\x00\x00" + (10).to_bytes(8, "big"))
    assert r1 == r0 + b"\x00\x00\x00\x03"
    assert r2 == r0 + (77).to_bytes(8, "big") + b"\x00\x00\x00\x03"
