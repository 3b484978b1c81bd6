"""Headers, errors carrying headers, flexible bytes, records parts and zero copy."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from pybroker.protocol.types import ZERO_UUID
from pybroker.protocol import (
    APIS,
    EncodeError,
    MalformedRequestError,
    RequestHeader,
    UnknownApiError,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)


class FileSlice:
    """Stands in for the Rust file slice: opaque, with an integer ``length``."""

    def __init__(self, length: int) -> None:
        self.length = length


def _header(key: int, version: int, correlation: int = 1, client: bytes = b"c") -> bytes:
    return (key.to_bytes(2, "big") + version.to_bytes(2, "big") + correlation.to_bytes(4, "big")
            + len(client).to_bytes(2, "big") + client)


# ---------------------------------------------------------------- request headers


def test_unknown_api_key_keeps_header() -> None:
    for key in (57, 99, 0x7FFF):
        with pytest.raises(UnknownApiError) as info:
            decode_request(_header(key, 0, 77) + b"junk")
        assert info.value.header == RequestHeader(key, 0, 77, "c")


@pytest.mark.parametrize(("key", "version"), [(0, 11), (1, 3), (1, 18), (18, 5), (18, 127),
                                              (44, 1), (3, -1)])
def test_unsupported_version_keeps_header(key: int, version: int) -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(_header(key, version & 0xFFFF, 12, b"librdkafka") + b"\x00\x01\x02")
    assert info.value.header == RequestHeader(key, version, 12, "librdkafka")


def test_api_versions_v0_with_v0_header() -> None:
    header, body = decode_request(b"\x00\x12\x00\x00\x00\x00\x00\x09")
    assert header == RequestHeader(18, 0, 9, None)
    assert body == {"client_software_name": "", "client_software_version": ""}


def test_null_client_id_and_header_tagged_fields() -> None:
    frame = (b"\x00\x12\x00\x03\x00\x00\x00\x02\xff\xff" + b"\x01\x05\x02ab"
             + b"\x05kcat\x041.7\x00")
    header, body = decode_request(frame)
    assert header == RequestHeader(18, 3, 2, None)
    assert body == {"client_software_name": "kcat", "client_software_version": "1.7"}


def test_header_tagged_field_count_over_127() -> None:
    """A count of two varint bytes (130 = 0x82 0x01): every field skipped, the body read
    after them; a count past the frame's end is malformed."""
    fields = b"".join((bytes([tag]) if tag < 128 else bytes([tag & 0x7F | 0x80, tag >> 7]))
                      + b"\x01a" for tag in range(130))
    frame = (b"\x00\x12\x00\x03\x00\x00\x00\x02\xff\xff" + b"\x82\x01" + fields
             + b"\x05kcat\x041.7\x00")
    header, body = decode_request(frame)
    assert header == RequestHeader(18, 3, 2, None)
    assert body == {"client_software_name": "kcat", "client_software_version": "1.7"}
    with pytest.raises(MalformedRequestError):
        decode_request(b"\x00\x12\x00\x03\x00\x00\x00\x02\xff\xff")


# ---------------------------------------------------------------- flexible bytes


def test_api_versions_v3_request_bytes() -> None:
    parts = encode_request(18, 3, 1, "c", {"client_software_name": "kcat",
                                           "client_software_version": "1.7"})
    body = b"\x05kcat" + b"\x041.7" + b"\x00"
    expected_frame = _header(18, 3) + b"\x00" + body
    assert parts == [len(expected_frame).to_bytes(4, "big") + expected_frame]
    assert decode_request(expected_frame)[1] == {"client_software_name": "kcat",
                                                "client_software_version": "1.7"}


def test_api_versions_v3_response_bytes_header_v0() -> None:
    body = {"error_code": 0, "throttle_time_ms": 5, "api_keys": [
        {"api_key": 0, "min_version": 0, "max_version": 8},
        {"api_key": 18, "min_version": 0, "max_version": 4}]}
    (frame,) = encode_response(18, 3, 0x01020304, body)
    expected = (b"\x01\x02\x03\x04"  # correlation id, no tagged fields: header v0
                + b"\x00\x00"  # error code
                + b"\x03"  # compact array of 2
                + b"\x00\x00\x00\x00\x00\x08\x00"
                + b"\x00\x12\x00\x00\x00\x04\x00"
                + b"\x00\x00\x00\x05"  # throttle time
                + b"\x00")  # no tagged fields (features left at their defaults)
    assert frame == len(expected).to_bytes(4, "big") + expected


def test_api_versions_v3_tagged_fields_bytes() -> None:
    body = {"finalized_features_epoch": 3, "zk_migration_ready": True}
    (frame,) = encode_response(18, 3, 1, body)
    tail = b"\x02" + b"\x01\x08" + (3).to_bytes(8, "big") + b"\x03\x01\x01"
    assert frame.endswith(b"\x00\x00\x00\x00" + tail)
    _, decoded = decode_response(18, 3, frame[4:])
    assert decoded["finalized_features_epoch"] == 3 and decoded["zk_migration_ready"] is True
    assert decoded["supported_features"] == []


def test_api_versions_error_response_is_v0_body() -> None:
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}
    (frame,) = encode_response(18, 0, 4, body)
    assert frame == (b"\x00\x00\x00\x10" + b"\x00\x00\x00\x04" + b"\x00\x23"
                     + b"\x00\x00\x00\x01" + b"\x00\x12\x00\x00\x00\x04")
    assert decode_response(18, 3, frame[4:])[1]["error_code"] == 35


FETCH_V12_REQUEST = (
    b"\xff\xff\xff\xff"  # replica id
    + b"\x00\x00\x01\xf4"  # max wait 500
    + b"\x00\x00\x00\x01"  # min bytes
    + b"\x03\x20\x00\x00"  # max bytes
    + b"\x01"  # isolation level read_committed
    + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"  # session id, epoch
    + b"\x02" + b"\x02t"  # 1 topic "t"
    + b"\x02"  # 1 partition
    + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + (5).to_bytes(8, "big")
    + b"\x00\x00\x00\x02" + b"\xff" * 8 + b"\x00\x10\x00\x00"
    + b"\x00"  # partition tagged fields
    + b"\x00"  # topic tagged fields
    + b"\x01"  # no forgotten topics
    + b"\x03r1"  # rack id
    + b"\x01" + b"\x00\x03\x03c1"  # tagged: cluster_id (tag 0) = "c1"
)


def test_fetch_v12_request_bytes() -> None:
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "topic_id": ZERO_UUID, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 5,
                 "last_fetched_epoch": 2, "log_start_offset": -1,
                 "partition_max_bytes": 1048576, "replica_directory_id": ZERO_UUID}]}],
            "forgotten_topics_data": [], "rack_id": "r1", "cluster_id": "c1",
            "replica_state": {"replica_id": -1, "replica_epoch": -1}}
    frame = _header(1, 12) + b"\x00" + FETCH_V12_REQUEST
    header, decoded = decode_request(frame)
    assert header == RequestHeader(1, 12, 1, "c")
    assert decoded == body
    assert b"".join(encode_request(1, 12, 1, "c", body))[4:] == frame


def test_fetch_v12_response_with_file_slices() -> None:
    a, b = FileSlice(100), FileSlice(300)
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 10, "last_stable_offset": 10,
         "log_start_offset": 0, "records": a},
        {"partition_index": 1, "high_watermark": 7, "last_stable_offset": 7,
         "log_start_offset": 0, "records": b,
         "current_leader": {"leader_id": 2, "leader_epoch": 4}}]}]}
    parts = encode_response(1, 12, 9, body)
    assert len(parts) == 5 and parts[1] is a and parts[3] is b
    assert all(isinstance(p, bytes) for p in parts[0::2])
    head, middle, tail = parts[0], parts[2], parts[4]

    def partition(index: int, hw: int) -> bytes:
        return (index.to_bytes(4, "big") + b"\x00\x00" + hw.to_bytes(8, "big")
                + hw.to_bytes(8, "big") + bytes(8) + b"\x00" + b"\xff\xff\xff\xff")

    assert head[4:] == (b"\x00\x00\x00\x09" + b"\x00"  # header v1
                    + bytes(4) + bytes(2) + bytes(4)  # throttle, error, session id
                    + b"\x02\x02t\x03" + partition(0, 10) + b"\x65")  # records length 100+1
    assert middle == (b"\x00" + partition(1, 7) + b"\xad\x02")  # 300+1 as a varint
    # partition 1 tagged fields: current_leader (tag 1, 9 bytes), then topic/top-level ends
    assert tail == b"\x01\x01\x09" + b"\x00\x00\x00\x02\x00\x00\x00\x04\x00" + b"\x00\x00"
    total = sum(len(p) if isinstance(p, bytes) else p.length for p in parts)
    assert int.from_bytes(head[:4], "big") == total - 4


def test_fetch_response_records_default_is_empty_not_null() -> None:
    (frame,) = encode_response(1, 11, 1, {"responses": [{"topic": "t", "partitions": [{}]}]})
    assert frame.endswith(b"\x00\x00\x00\x00")  # records length 0
    _, body = decode_response(1, 11, frame[4:])
    partition = body["responses"][0]["partitions"][0]
    assert bytes(partition["records"]) == b""
    assert partition["preferred_read_replica"] == -1
    assert partition["aborted_transactions"] is None


def test_records_bytes_like_are_copied_into_one_part() -> None:
    for records in (b"abc", bytearray(b"abc"), memoryview(b"xabcx")[1:4]):
        parts = encode_response(1, 4, 1, {"responses": [{"topic": "t", "partitions": [
            {"records": records}]}]})
        assert len(parts) == 1 and parts[0].endswith(b"\x00\x00\x00\x03abc")


def test_produce_request_with_file_slice_records() -> None:
    s = FileSlice(1000)
    parts = encode_request(0, 7, 3, "c", {"acks": 1, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": s}]}]})
    assert len(parts) == 2 and parts[1] is s  # no empty trailing piece
    assert int.from_bytes(parts[0][:4], "big") == len(parts[0]) - 4 + 1000


# ---------------------------------------------------------------- response headers


@pytest.mark.parametrize(("key", "version", "tagged"), [(18, 3, False), (18, 4, False),
                                                       (1, 12, True), (1, 11, False),
                                                       (28, 3, True), (0, 8, False)])
def test_response_header_version(key: int, version: int, tagged: bool) -> None:
    parts = encode_response(key, version, 0x0A0B0C0D, {})
    frame = b"".join(p for p in parts if isinstance(p, bytes))
    assert frame[4:8] == b"\x0a\x0b\x0c\x0d"
    assert APIS[key].response_header_version(version) == (1 if tagged else 0)
    if tagged:
        assert frame[8] == 0


def test_encode_error_names_the_api() -> None:
    with pytest.raises(EncodeError, match="Metadata v8"):
        encode_response(3, 8, 1, {"brokers": [{"node_id": "one"}]})
    with pytest.raises(EncodeError):
        encode_response(3, 8, 1, {"cluster_id": 5})


# ---------------------------------------------------------------- zero copy and speed


def test_large_produce_decodes_without_copying_records() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": payload}]}]}
    frame = b"".join(encode_request(0, 8, 1, "producer", body))[4:]
    decode_request(frame)  # compile the decoder first
    buf = memoryview(frame)
    tracemalloc.start()
    start = time.perf_counter()
    _, decoded = decode_request(buf)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    records = decoded["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and records.obj is frame
    assert records == payload
    assert peak < 64 * 1024
    assert elapsed < 0.05


def test_many_partitions_decode_fast() -> None:
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "topics": [
        {"topic": f"topic-{t}", "partitions": [{"partition": p, "fetch_offset": p * 10,
                                                "partition_max_bytes": 1 << 20}
                                               for p in range(50)]} for t in range(20)]}
    frame = b"".join(encode_request(1, 11, 1, "c", body))[4:]
    decode_request(frame)
    # the best of 20 single decodes: a loaded machine delays some of them, never all; a
    # decode that grew quadratic in the partitions (the defect this guards) is slow in each
    fastest = float("inf")
    for _ in range(20):
        start = time.perf_counter()
        _, decoded = decode_request(frame)
        fastest = min(fastest, time.perf_counter() - start)
    assert decoded["topics"][19]["partitions"][49]["fetch_offset"] == 490
    assert fastest < 0.01  # 1000 partitions: about 0.5 ms on a quiet machine


def test_a_tagged_field_count_over_127_is_read_as_a_varint() -> None:
    """The tagged-field count is read inline when it is one byte (nearly always 0); a
    count over 127 (a two-byte varint) still skips every unknown field (issue 26)."""
    body = {"replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "r",
            "topics": [{"topic": "t", "topic_id": ZERO_UUID, "partitions": [
                {"partition": 0, "current_leader_epoch": 3, "fetch_offset": 9,
                 "last_fetched_epoch": 3, "log_start_offset": 0,
                 "partition_max_bytes": 100}]}],
            "forgotten_topics_data": []}
    frame = b"".join(bytes(p) for p in encode_request(1, 12, 7, "c", body))[4:]
    assert frame[-1] == 0  # no top-level tagged field
    unknown = b"".join(bytes([0x80 | (tag & 0x7F), tag >> 7, 1, 0xAB])  # tag, size 1, 1 byte
                       for tag in range(200, 330))
    grown = frame[:-1] + bytes([0x80 | (130 & 0x7F), 130 >> 7]) + unknown
    _, plain = decode_request(frame)
    _, tagged = decode_request(grown)
    assert tagged == plain and tagged["topics"][0]["partitions"][0]["fetch_offset"] == 9
