"""A tiny raw Kafka wire-protocol client for malformed-input and protocol-level tests.

Frame: int32 size | request header v1 (api_key i16, api_version i16, correlation_id i32,
client_id nullable string) | body. Only non-flexible versions are encoded here.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

from kafka.record.default_records import DefaultRecordBatchBuilder

API_PRODUCE = 0
API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3
API_VERSIONS = 18

CLIENT_ID = b"raw-test"


# --- encoding ---------------------------------------------------------------------------
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def bytes_(v: bytes | None) -> bytes:
    if v is None:
        return i32(-1)
    return i32(len(v)) + v


def array(items: list[bytes] | None) -> bytes:
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(items)


def request_header(api_key: int, api_version: int, correlation_id: int,
                   client_id: bytes | None = CLIENT_ID) -> bytes:
    head = struct.pack(">hhi", api_key, api_version, correlation_id)
    if client_id is None:
        return head + i16(-1)
    return head + i16(len(client_id)) + client_id


def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


# --- decoding ---------------------------------------------------------------------------
class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def i8(self) -> int:
        return self._take(">b")

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def i64(self) -> int:
        return self._take(">q")

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw.decode()

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(raw)

    def remaining(self) -> int:
        return len(self.data) - self.pos


# --- record batches -----------------------------------------------------------------------
@dataclass
class Rec:
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_ms: int | None = None


def build_batch(records: list[Rec], compression: int = 0) -> bytes:
    """A magic-2 record batch (base offset 0) built by kafka-python's builder."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )
    now = int(time.time() * 1000)
    for i, r in enumerate(records):
        ts = r.timestamp_ms if r.timestamp_ms is not None else now
        meta = builder.append(i, timestamp=ts, key=r.key, value=r.value, headers=r.headers)
        assert meta is not None
    return bytes(builder.build())


def corrupt_crc(batch: bytes) -> bytes:
    """Flip one byte inside the CRC-covered area (the last byte of the batch)."""
    b = bytearray(batch)
    b[-1] ^= 0xFF
    return bytes(b)


def batch_record_count(batch: bytes) -> int:
    return struct.unpack_from(">i", batch, 57)[0]


def iter_batches(records: bytes) -> list[tuple[int, int, int]]:
    """(base_offset, last_offset_delta, record_count) of each complete batch in a fetch."""
    out = []
    pos = 0
    while pos + 12 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > len(records):
            break
        last_delta = struct.unpack_from(">i", records, pos + 23)[0]
        count = struct.unpack_from(">i", records, pos + 57)[0]
        out.append((base, last_delta, count))
        pos += 12 + length
    return out


# --- requests / responses -------------------------------------------------------------------
def api_versions_body() -> bytes:
    return b""


@dataclass
class ApiVersionsResp:
    error_code: int
    ranges: dict[int, tuple[int, int]]


def parse_api_versions_v0(body: bytes) -> ApiVersionsResp:
    r = Reader(body)
    err = r.i16()
    n = r.i32()
    ranges = {}
    for _ in range(max(n, 0)):
        key, lo, hi = r.i16(), r.i16(), r.i16()
        ranges[key] = (lo, hi)
    return ApiVersionsResp(err, ranges)


def produce_body_v3(topic: str, partition: int, records: bytes, acks: int = -1,
                    timeout_ms: int = 5000) -> bytes:
    part = i32(partition) + bytes_(records)
    return string(None) + i16(acks) + i32(timeout_ms) + array([string(topic) + array([part])])


@dataclass
class ProducePart:
    topic: str
    partition: int
    error_code: int
    base_offset: int


def parse_produce_v3(body: bytes) -> list[ProducePart]:
    r = Reader(body)
    out = []
    for _ in range(r.i32()):
        topic = r.string() or ""
        for _ in range(r.i32()):
            part = r.i32()
            err = r.i16()
            base = r.i64()
            r.i64()  # log_append_time
            out.append(ProducePart(topic, part, err, base))
    return out


def list_offsets_body_v1(topic: str, partition: int, timestamp: int) -> bytes:
    part = i32(partition) + i64(timestamp)
    return i32(-1) + array([string(topic) + array([part])])


def parse_list_offsets_v1(body: bytes) -> tuple[int, int, int]:
    """(error_code, timestamp, offset) of the first partition."""
    r = Reader(body)
    assert r.i32() >= 1
    r.string()
    assert r.i32() >= 1
    r.i32()
    err = r.i16()
    ts = r.i64()
    off = r.i64()
    return err, ts, off


def fetch_body_v4(topic: str, partition: int, offset: int, max_wait_ms: int = 500,
                  min_bytes: int = 1, max_bytes: int = 1 << 20,
                  partition_max_bytes: int = 1 << 20) -> bytes:
    part = i32(partition) + i64(offset) + i32(partition_max_bytes)
    return (i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0)
            + array([string(topic) + array([part])]))


@dataclass
class FetchPart:
    topic: str
    partition: int
    error_code: int
    high_watermark: int
    records: bytes


def parse_fetch_v4(body: bytes) -> list[FetchPart]:
    r = Reader(body)
    r.i32()  # throttle
    out = []
    for _ in range(r.i32()):
        topic = r.string() or ""
        for _ in range(r.i32()):
            part = r.i32()
            err = r.i16()
            hw = r.i64()
            r.i64()  # last stable offset
            n_aborted = r.i32()
            for _ in range(max(n_aborted, 0)):
                r.i64()
                r.i64()
            records = r.bytes_()
            out.append(FetchPart(topic, part, err, hw, records or b""))
    return out


def metadata_body_v1(topics: list[str] | None) -> bytes:
    return array(None if topics is None else [string(t) for t in topics])


# --- connection --------------------------------------------------------------------------
class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self._corr = 0

    def __enter__(self) -> RawClient:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, api_version: int, body: bytes,
             correlation_id: int | None = None) -> int:
        corr = self.next_corr() if correlation_id is None else correlation_id
        self.send_raw(frame(request_header(api_key, api_version, corr) + body))
        return corr

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)}/{n} bytes")
            buf += chunk
        return bytes(buf)

    def recv(self) -> tuple[int, bytes]:
        """One response: (correlation_id, body after the v0 response header)."""
        (size,) = struct.unpack(">i", self.recv_exact(4))
        payload = self.recv_exact(size)
        (corr,) = struct.unpack_from(">i", payload, 0)
        return corr, payload[4:]

    def request(self, api_key: int, api_version: int, body: bytes) -> bytes:
        corr = self.send(api_key, api_version, body)
        got, resp = self.recv()
        assert got == corr, f"correlation id {got} != {corr}"
        return resp

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the peer closes (EOF or reset) within ``timeout`` without sending data."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return data == b""

    # convenience -------------------------------------------------------------------
    def api_versions(self, version: int = 0) -> ApiVersionsResp:
        return parse_api_versions_v0(self.request(API_VERSIONS, version, b""))

    def produce(self, topic: str, partition: int, batch: bytes, acks: int = -1) -> ProducePart:
        body = self.request(API_PRODUCE, 3, produce_body_v3(topic, partition, batch, acks))
        return parse_produce_v3(body)[0]

    def list_offsets(self, topic: str, partition: int, timestamp: int) -> tuple[int, int, int]:
        body = self.request(API_LIST_OFFSETS, 1, list_offsets_body_v1(topic, partition, timestamp))
        return parse_list_offsets_v1(body)

    def high_watermark(self, topic: str, partition: int = 0) -> int:
        err, _, off = self.list_offsets(topic, partition, -1)
        assert err == 0, f"ListOffsets error {err}"
        return off

    def fetch(self, topic: str, partition: int, offset: int, **kw: int) -> FetchPart:
        body = self.request(API_FETCH, 4, fetch_body_v4(topic, partition, offset, **kw))
        return parse_fetch_v4(body)[0]


def metadata_body_v4(topics: list[str] | None, allow_auto_create: bool) -> bytes:
    names = None if topics is None else [string(t) for t in topics]
    return array(names) + i8(1 if allow_auto_create else 0)


@dataclass
class TopicMeta:
    name: str
    error_code: int
    partitions: dict[int, int]  # partition -> error code


def parse_metadata_v4(body: bytes) -> dict[str, TopicMeta]:
    r = Reader(body)
    r.i32()  # throttle
    for _ in range(r.i32()):  # brokers
        r.i32()
        r.string()
        r.i32()
        r.string()
    r.string()  # cluster id
    r.i32()  # controller
    out = {}
    for _ in range(r.i32()):
        err = r.i16()
        name = r.string() or ""
        r.i8()  # internal
        parts = {}
        for _ in range(r.i32()):
            perr = r.i16()
            idx = r.i32()
            r.i32()  # leader
            for _ in range(2):  # replicas, isr (offline_replicas only from v5)
                for _ in range(max(r.i32(), 0)):
                    r.i32()
            parts[idx] = perr
        out[name] = TopicMeta(name, err, parts)
    return out


def metadata_v4(client: RawClient, topics: list[str] | None,
                allow_auto_create: bool) -> dict[str, TopicMeta]:
    body = client.request(API_METADATA, 4, metadata_body_v4(topics, allow_auto_create))
    return parse_metadata_v4(body)
