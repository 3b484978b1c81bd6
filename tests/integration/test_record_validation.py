"""Record-level validation of produced batches (issue 11), over raw sockets.

Every malformed batch here carries a *valid* CRC-32C and batchLength (they are
recomputed after the mangling), so only the broker's record-level checks
(rust/log/src/validate.rs, Kafka's LogValidator / DefaultRecord rules) can
catch it. Each case asserts the Kafka error code, that the log end offset did
not move, and that a valid produce on the same connection then succeeds.
"""

from __future__ import annotations

import gzip
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from kafka.record.util import calc_crc32c

from . import rawclient
from .helpers import create_topic
from .rawclient import RawClient, Rec

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

CORRUPT_MESSAGE = 2
INVALID_TIMESTAMP = 32
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

HEADER = 61  # v2 batch header
ATTRIBUTES_AT, LAST_DELTA_AT, MAX_TS_AT = 21, 23, 35
PRODUCER_ID_AT, BASE_SEQUENCE_AT, COUNT_AT = 43, 53, 57
CONTROL, TRANSACTIONAL, LOG_APPEND_TIME = 0x20, 0x10, 0x08
HOUR_MS = 3_600_000


# --- wire encoding of records (zigzag varints, -1 = null) -----------------------------------
def varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def field(b: bytes | None) -> bytes:
    return varint(-1) if b is None else varint(len(b)) + b


def body(offset_delta: int, key: bytes | None = b"k", value: bytes | None = b"value",
         headers: list[tuple[bytes, bytes | None]] | None = None, ts_delta: int = 0) -> bytes:
    """One record without its length prefix."""
    out = b"\x00" + varint(ts_delta) + varint(offset_delta) + field(key) + field(value)
    hs = headers or []
    out += varint(len(hs))
    for k, v in hs:
        out += field(k) + field(v)
    return out


def record(rec_body: bytes, length: int | None = None) -> bytes:
    return varint(len(rec_body) if length is None else length) + rec_body


def good(i: int) -> bytes:
    return record(body(i))


def reframe(records: bytes, count: int, *, attributes: int = 0, timestamp_ms: int | None = None,
            max_timestamp: int | None = None, producer_id: int = -1,
            base_sequence: int = -1) -> bytes:
    """A v2 batch around `records` with a correct batchLength and CRC-32C."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    max_ts = ts if max_timestamp is None else max_timestamp
    tail = struct.pack(">hiqqqhii", attributes, count - 1, ts, max_ts, producer_id, 0,
                       base_sequence, count) + records
    crc = calc_crc32c(tail)
    return struct.pack(">qiibI", 0, len(tail) + 9, 0, 2, crc) + tail


def three(middle: bytes, **kw: int) -> bytes:
    """Records 0 and 2 are well formed; `middle` is record 1."""
    return reframe(good(0) + middle + good(2), 3, **kw)


# --- the check every case makes ---------------------------------------------------------------
def assert_rejected(rc: RawClient, topic: str, batch: bytes, code: int) -> None:
    before = rc.high_watermark(topic)
    res = rc.produce(topic, 0, batch)
    assert res.error_code == code, res
    assert rc.high_watermark(topic) == before, "a rejected batch moved the log end offset"
    ok = rc.produce(topic, 0, rawclient.build_batch([Rec(b"after", key=b"k")]))
    assert (ok.error_code, ok.base_offset) == (0, before), ok
    assert rc.high_watermark(topic) == before + 1


def assert_accepted(rc: RawClient, topic: str, batch: bytes) -> None:
    before = rc.high_watermark(topic)
    res = rc.produce(topic, 0, batch)
    assert (res.error_code, res.base_offset) == (0, before), res
    count = struct.unpack_from(">i", batch, COUNT_AT)[0]
    assert rc.high_watermark(topic) == before + count


NAME = body(1)
N = len(NAME)


def _varint6() -> bytes:
    # offset delta 1 written in 6 bytes: a varint (int32) has at most 5
    b = b"\x00" + varint(0) + b"\x82\x80\x80\x80\x80\x00" + field(b"k") + field(b"v") + varint(0)
    return three(record(b))


def _varlong11() -> bytes:
    # timestamp delta 0 in 11 bytes: a varlong has at most 10
    b = b"\x00" + b"\x80" * 10 + b"\x00" + varint(1) + field(b"k") + field(b"v") + varint(0)
    return three(record(b))


def _value_past_record() -> bytes:
    # value length 9 with 5 value bytes: the value would take 4 bytes of record 2
    b = b"\x00" + varint(0) + varint(1) + field(b"k") + varint(9) + b"value" + varint(0)
    return three(record(b))


def _key_past_batch() -> bytes:
    return three(record(b"\x00" + varint(0) + varint(1) + varint(10_000)))


def _without_header_count(tail: bytes) -> bytes:
    return three(record(NAME[:-1] + tail))


CASES: dict[str, tuple[Callable[[], bytes], int]] = {
    "record length too long": (lambda: three(record(NAME, N + 1)), INVALID_RECORD),
    "record length too short": (lambda: three(record(NAME, N - 1)), INVALID_RECORD),
    "record length negative": (lambda: three(record(NAME, -1)), INVALID_RECORD),
    "record length huge": (lambda: three(record(NAME, 2**31 - 1)), INVALID_RECORD),
    "records truncated": (lambda: reframe(good(0) + good(1), 3), INVALID_RECORD),
    "trailing bytes": (lambda: reframe(good(0) + good(1) + b"\x00", 2), INVALID_RECORD),
    "extra record": (lambda: reframe(good(0) + good(1), 1), INVALID_RECORD),
    "value past record": (_value_past_record, INVALID_RECORD),
    "key past batch": (_key_past_batch, INVALID_RECORD),
    "negative header count": (lambda: _without_header_count(varint(-1)), INVALID_RECORD),
    "header count past record": (lambda: _without_header_count(varint(40)), INVALID_RECORD),
    "negative header key length": (
        lambda: _without_header_count(varint(1) + varint(-1) + varint(-1)), INVALID_RECORD),
    "varint over 5 bytes": (_varint6, INVALID_RECORD),
    "varlong over 10 bytes": (_varlong11, INVALID_RECORD),
    "offset deltas out of order": (lambda: reframe(good(1) + good(0), 2), INVALID_RECORD),
    "offset deltas with a gap": (lambda: reframe(good(0) + good(2), 2), INVALID_RECORD),
    "control batch": (lambda: reframe(good(0), 1, attributes=CONTROL), INVALID_RECORD),
    "transactional without producer id": (
        lambda: reframe(good(0), 1, attributes=TRANSACTIONAL), INVALID_RECORD),
    "producer id without sequence": (
        lambda: reframe(good(0), 1, producer_id=4242, base_sequence=-1), INVALID_RECORD),
    "producer sets LogAppendTime, no timestamp": (
        lambda: reframe(good(0), 1, attributes=LOG_APPEND_TIME, max_timestamp=-1),
        INVALID_TIMESTAMP),
    "record timestamp 2h in the future": (
        lambda: three(record(body(1, ts_delta=2 * HOUR_MS))), INVALID_TIMESTAMP),
    "batch max timestamp 2h in the future": (
        lambda: reframe(good(0), 1, max_timestamp=int(time.time() * 1000) + 2 * HOUR_MS),
        INVALID_TIMESTAMP),
    "gzip records malformed inside": (
        lambda: reframe(gzip.compress(good(0) + good(1) + b"\x07"), 2, attributes=1),
        INVALID_RECORD),
}
# cases where Kafka 4.0 answers differently (documented in validate.rs): Kafka rewrites
# (or does not check) inner offsets and the batch max timestamp, and stores a
# transactional batch without producer id when the request has a transactional id
PYBROKER_ONLY = {"offset deltas out of order", "offset deltas with a gap",
                 "batch max timestamp 2h in the future",
                 "transactional without producer id"}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_batch_rejected_with_valid_crc(broker: Broker, topic_name: str,
                                                 case: str) -> None:
    if broker.external and case in PYBROKER_ONLY:
        pytest.skip("pybroker refuses what Kafka rewrites or accepts")
    make, code = CASES[case]
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as rc:
        assert rc.produce(topic_name, 0, rawclient.build_batch([Rec(b"first")])).error_code == 0
        assert_rejected(rc, topic_name, make(), code)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_is_unsupported_compression(broker: Broker, topic_name: str,
                                                  codec: int) -> None:
    if broker.external:
        pytest.skip("Kafka 4.0 answers UNKNOWN_SERVER_ERROR (IllegalArgumentException)")
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as rc:
        batch = reframe(good(0), 1, attributes=codec)
        assert_rejected(rc, topic_name, batch, UNSUPPORTED_COMPRESSION_TYPE)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_payload_that_does_not_decompress_is_corrupt(broker: Broker, topic_name: str,
                                                      codec: int) -> None:
    if broker.external:
        pytest.skip("Kafka 4.0 answers UNKNOWN_SERVER_ERROR (KafkaException)")
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as rc:
        garbage = bytes(range(7, 200, 3)) * 3
        assert_rejected(rc, topic_name, reframe(garbage, 2, attributes=codec), CORRUPT_MESSAGE)


def test_edge_cases_that_are_legal(broker: Broker, topic_name: str) -> None:
    """What Kafka accepts must still be accepted: null header values, null key and
    value, a 5-byte varint, empty records section fields."""
    create_topic(broker.bootstrap, topic_name)
    five = (b"\x00" + varint(0) + b"\x82\x80\x80\x80\x00" + field(b"k") + field(None)
            + varint(0))
    with RawClient(broker.bootstrap) as rc:
        assert_accepted(rc, topic_name, three(record(five)))
        assert_accepted(rc, topic_name, three(record(body(1, None, None))))
        assert_accepted(rc, topic_name, three(record(body(1, headers=[(b"h", None), (b"", b"")]))))
        assert_accepted(rc, topic_name, reframe(gzip.compress(good(0) + good(1)), 2, attributes=1))
        # no timestamp (-1) is never out of range
        assert_accepted(rc, topic_name, reframe(good(0), 1, timestamp_ms=-1))
        assert_accepted(rc, topic_name, reframe(good(0), 1, timestamp_ms=1_000))


def test_a_bad_batch_refuses_the_whole_partition(broker: Broker, topic_name: str) -> None:
    """Two batches for one partition, the second malformed: neither is written."""
    if broker.external:
        pytest.skip("Kafka 4.0 refuses any second batch of a produce partition")
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as rc:
        both = rawclient.build_batch([Rec(b"ok")]) + three(record(NAME, N - 1))
        assert_rejected(rc, topic_name, both, INVALID_RECORD)


def test_one_bad_partition_fails_alone(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    bad = three(record(NAME, N + 1))
    good_batch = rawclient.build_batch([Rec(b"fine")])
    parts = [rawclient.i32(0) + rawclient.bytes_(bad),
             rawclient.i32(1) + rawclient.bytes_(good_batch)]
    body_ = (rawclient.string(None) + rawclient.i16(-1) + rawclient.i32(5000)
             + rawclient.array([rawclient.string(topic_name) + rawclient.array(parts)]))
    with RawClient(broker.bootstrap) as rc:
        resp = rawclient.parse_produce_v3(rc.request(rawclient.API_PRODUCE, 3, body_))
        assert sorted((p.partition, p.error_code) for p in resp) == [(0, INVALID_RECORD), (1, 0)]
        assert rc.high_watermark(topic_name, 0) == 0
        assert rc.high_watermark(topic_name, 1) == 1


def test_timestamp_bounds_from_topic_config(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, config={
        "message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    with RawClient(broker.bootstrap) as rc:
        assert_accepted(rc, topic_name, reframe(good(0), 1, timestamp_ms=now))
        for ts in (now - 10 * 60_000, now + 10 * 60_000):
            assert_rejected(rc, topic_name, reframe(good(0), 1, timestamp_ms=ts), INVALID_TIMESTAMP)
        # one record of three out of range rejects the whole batch
        late = three(record(body(1, ts_delta=-10 * 60_000)), timestamp_ms=now)
        assert_rejected(rc, topic_name, late, INVALID_TIMESTAMP)


def test_log_append_time_topic_ignores_producer_timestamps(broker: Broker,
                                                           topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, config={
        "message.timestamp.type": "LogAppendTime", "message.timestamp.after.max.ms": "0"})
    with RawClient(broker.bootstrap) as rc:
        far = reframe(good(0), 1, timestamp_ms=int(time.time() * 1000) + 100 * HOUR_MS)
        assert_accepted(rc, topic_name, far)
        # ... but a producer may not claim LogAppendTime itself
        lat = reframe(good(0), 1, attributes=LOG_APPEND_TIME)
        assert_rejected(rc, topic_name, lat, INVALID_TIMESTAMP)


def test_compacted_topic_needs_keys(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    with RawClient(broker.bootstrap) as rc:
        assert_accepted(rc, topic_name, reframe(record(body(0, key=b"k", value=None)), 1))
        keyless = reframe(good(0) + record(body(1, key=None)), 2)
        assert_rejected(rc, topic_name, keyless, INVALID_RECORD)


def test_broker_timestamp_bounds_are_topic_defaults(broker_factory: BrokerFactory,
                                                    topic_name: str) -> None:
    b = broker_factory({"log.message.timestamp.before.max.ms": "60000",
                        "log.message.timestamp.after.max.ms": "120000"})
    create_topic(b.bootstrap, topic_name)
    now = int(time.time() * 1000)
    with RawClient(b.bootstrap) as rc:
        assert_accepted(rc, topic_name, reframe(good(0), 1, timestamp_ms=now + 90_000))
        assert_rejected(rc, topic_name, reframe(good(0), 1, timestamp_ms=now + 10 * 60_000),
                        INVALID_TIMESTAMP)
        assert_rejected(rc, topic_name, reframe(good(0), 1, timestamp_ms=now - 10 * 60_000),
                        INVALID_TIMESTAMP)


# --- KIP-467: the refused records by index (Produce v8+) --------------------------------------
def produce_v9(bootstrap: str, topic: str, batch: bytes) -> dict[str, object]:
    """One Produce v9 of `batch` to partition 0: that partition's answer."""
    from .test_kip848_errors import Client

    answer = Client(bootstrap).call(0, 9, {
        "transactional_id": None, "acks": -1, "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    part: dict[str, object] = answer["responses"][0]["partition_responses"][0]
    return part


def refused_indexes(part: dict[str, object]) -> list[int]:
    errors = part["record_errors"]
    assert isinstance(errors, list)
    return [e["batch_index"] for e in errors]


def test_refused_records_are_named_by_index(broker: Broker, topic_name: str) -> None:
    """As Kafka's LogValidator: the whole batch fails, record_errors lists every
    keyless record of a compacted topic (its index and why), error_message sums up."""
    create_topic(broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    keyless = {0, 3, 7}
    records = b"".join(record(body(i, key=None if i in keyless else b"k")) for i in range(10))
    part = produce_v9(broker.bootstrap, topic_name, reframe(records, 10))
    assert part["error_code"] == INVALID_RECORD
    assert refused_indexes(part) == [0, 3, 7]
    assert all("without key" in e["batch_index_error_message"]
               for e in part["record_errors"])  # type: ignore[attr-defined]
    assert "3 record errors" in str(part["error_message"])
    with RawClient(broker.bootstrap) as rc:
        assert rc.high_watermark(topic_name) == 0, "no record of the batch is written"


def test_refused_timestamps_are_named_by_index(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, config={
        "message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"})
    late = three(record(body(1, ts_delta=-10 * 60_000)))
    part = produce_v9(broker.bootstrap, topic_name, late)
    assert (part["error_code"], refused_indexes(part)) == (INVALID_TIMESTAMP, [1])
    ok = produce_v9(broker.bootstrap, topic_name, reframe(good(0), 1))
    assert (ok["error_code"], ok["record_errors"]) == (0, [])


def test_librdkafka_fails_only_the_keyless_records(broker: Broker, topic_name: str) -> None:
    """confluent-kafka's delivery reports (librdkafka's 0011_produce_batch): of one batch
    of 100 to a compacted topic, the 10 without a key fail with INVALID_RECORD and the
    others, refused with them, with _INVALID_DIFFERENT_RECORD."""
    from confluent_kafka import KafkaError, Producer

    create_topic(broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    reports: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000,
                         "batch.num.messages": 1000, "message.timeout.ms": 20000})
    for i in range(100):
        producer.produce(topic_name, b"v%d" % i, key=None if i % 10 == 0 else b"k%d" % i,
                         partition=0, on_delivery=lambda err, msg: reports.append(
                             err.code() if err is not None else 0))
    assert producer.flush(30) == 0
    assert len(reports) == 100
    assert reports.count(KafkaError.INVALID_RECORD) == 10
    assert reports.count(KafkaError._INVALID_DIFFERENT_RECORD) == 90
