"""Malformed and edge-case input over raw sockets; the broker must survive all of it."""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import TYPE_CHECKING

import psutil
import pytest

from . import rawclient
from .helpers import admin, create_topic
from .rawclient import RawClient, frame, i16, i32, request_header

if TYPE_CHECKING:
    from conftest import Broker

MAX_REQUEST = 104_857_600  # socket.request.max.bytes default


def assert_healthy(broker: Broker) -> None:
    """The broker process is alive and serves a normal client (raw and librdkafka)."""
    if not broker.external:
        assert broker.proc is not None and broker.proc.poll() is None, "broker died"
    with RawClient(broker.bootstrap, timeout=5) as rc:
        resp = rc.api_versions(0)
        assert resp.error_code == 0 and rawclient.API_VERSIONS in resp.ranges
    md = admin(broker.bootstrap).list_topics(timeout=5)
    assert md.brokers


def closed_or_error(rc: RawClient, timeout: float = 5.0) -> bool:
    """True when the peer closes the connection (possibly after an error response)."""
    rc.sock.settimeout(timeout)
    try:
        data = rc.sock.recv(65536)
        if data == b"":
            return True
        # an error response is acceptable; then the connection may stay open
        return len(data) >= 4
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_truncated_frame_then_close(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as rc:
        full = frame(request_header(rawclient.API_VERSIONS, 0, 1))
        rc.send_raw(i32(100) + full[4:])  # announces 100 bytes, sends fewer
    with RawClient(broker.bootstrap) as rc:
        rc.send_raw(b"\x00\x00")  # not even a complete size prefix
    assert_healthy(broker)


def test_negative_size_closes_connection(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as rc:
        rc.send_raw(i32(-1) + b"\x00" * 16)
        assert rc.is_closed_by_peer(), "connection not closed after a negative frame size"
    assert_healthy(broker)


@pytest.mark.parametrize("size", [MAX_REQUEST + 1, 2_000_000_000])
def test_oversized_frame_closes_without_allocating(broker: Broker, size: int) -> None:
    proc = None if broker.external or broker.proc is None else psutil.Process(broker.proc.pid)
    rss_before = proc.memory_info().rss if proc else 0
    with RawClient(broker.bootstrap) as rc:
        rc.send_raw(i32(size) + request_header(rawclient.API_VERSIONS, 0, 1))
        assert rc.is_closed_by_peer(), "connection not closed after an oversized frame size"
    if proc:
        grown = proc.memory_info().rss - rss_before
        assert grown < 50 * 1024 * 1024, f"broker RSS grew by {grown} bytes"
    assert_healthy(broker)


def test_garbage_produce_body(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as rc:
        body = os.urandom(64)
        rc.send_raw(frame(request_header(rawclient.API_PRODUCE, 3, 7) + body))
        assert closed_or_error(rc)
    with RawClient(broker.bootstrap) as rc:
        # array count claiming billions of topics
        body = rawclient.string(None) + i16(1) + i32(1000) + i32(0x7FFFFFFF)
        rc.send_raw(frame(request_header(rawclient.API_PRODUCE, 3, 8) + body))
        assert closed_or_error(rc)
    assert_healthy(broker)


def test_garbage_header(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as rc:
        rc.send_raw(frame(b"\x00\x12"))  # header cut after the api key
        assert closed_or_error(rc)
    with RawClient(broker.bootstrap) as rc:
        rc.send_raw(frame(struct.pack(">hhih", 18, 0, 5, 500) + b"short"))  # bad client_id len
        assert closed_or_error(rc)
    assert_healthy(broker)


def test_unknown_api_key_closes_connection(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as rc:
        rc.send(9999, 0, b"")
        assert rc.is_closed_by_peer(), "connection not closed for unknown api key 9999"
    assert_healthy(broker)


def test_api_versions_unsupported_version(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as rc:
        corr = rc.send(rawclient.API_VERSIONS, 99, b"")
        got, body = rc.recv()
        assert got == corr
        resp = rawclient.parse_api_versions_v0(body)
        assert resp.error_code == 35  # UNSUPPORTED_VERSION
        assert rawclient.API_VERSIONS in resp.ranges
        assert resp.ranges[rawclient.API_VERSIONS][0] == 0
        # the connection stays usable
        again = rc.api_versions(0)
        assert again.error_code == 0
        assert again.ranges == resp.ranges
        assert again.ranges[rawclient.API_PRODUCE][1] >= 3
        assert again.ranges[rawclient.API_FETCH][1] >= 4


def test_null_client_id(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as rc:
        rc.send_raw(frame(request_header(rawclient.API_VERSIONS, 0, 42, client_id=None)))
        corr, body = rc.recv()
        assert corr == 42 and rawclient.parse_api_versions_v0(body).error_code == 0


def test_produce_bad_crc(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as rc:
        good = rawclient.build_batch([rawclient.Rec(b"good")])
        assert rc.produce(topic_name, 0, good).error_code == 0
        assert rc.high_watermark(topic_name) == 1
        bad = rawclient.corrupt_crc(rawclient.build_batch([rawclient.Rec(b"bad" * 10)]))
        assert rc.produce(topic_name, 0, bad).error_code == 2  # CORRUPT_MESSAGE
        assert rc.high_watermark(topic_name) == 1
        part = rc.fetch(topic_name, 0, 0, max_wait_ms=100)
        assert [b[0] for b in rawclient.iter_batches(part.records)] == [0]
    assert_healthy(broker)


def test_produce_truncated_batch(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as rc:
        batch = rawclient.build_batch([rawclient.Rec(b"v" * 100) for _ in range(3)])
        res = rc.produce(topic_name, 0, batch[:-7])
        assert res.error_code in (2, 87), res  # CORRUPT_MESSAGE / INVALID_RECORD
        assert rc.high_watermark(topic_name) == 0
    assert_healthy(broker)


def test_produce_unknown_partition(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as rc:
        res = rc.produce(topic_name, 5, rawclient.build_batch([rawclient.Rec(b"x")]))
        assert res.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert rc.high_watermark(topic_name) == 0


def test_pipelined_requests_answered_in_order(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with RawClient(broker.bootstrap) as rc:
        batch = rawclient.build_batch([rawclient.Rec(b"p")])
        corrs = [
            # a slow long-poll fetch first: later, faster requests must wait behind it
            rc.send(rawclient.API_FETCH, 4,
                    rawclient.fetch_body_v4(topic_name, 0, 0, max_wait_ms=300), 11),
            rc.send(rawclient.API_VERSIONS, 0, b"", 12),
            rc.send(rawclient.API_METADATA, 1, rawclient.metadata_body_v1([topic_name]), 13),
            rc.send(rawclient.API_PRODUCE, 3,
                    rawclient.produce_body_v3(topic_name, 0, batch, acks=1), 14),
            rc.send(rawclient.API_LIST_OFFSETS, 1,
                    rawclient.list_offsets_body_v1(topic_name, 0, -1), 15),
        ]
        got = [rc.recv() for _ in corrs]
    assert [c for c, _ in got] == corrs
    assert rawclient.parse_produce_v3(got[3][1])[0].error_code == 0
    err, _, hw = rawclient.parse_list_offsets_v1(got[4][1])
    assert (err, hw) == (0, 1)


def test_many_short_connections(broker: Broker) -> None:
    t = time.monotonic()
    for i in range(50):
        s = socket.create_connection(tuple_addr(broker.bootstrap), timeout=5)
        if i % 2:
            s.sendall(frame(request_header(rawclient.API_VERSIONS, 0, i)))
        s.close()
    assert time.monotonic() - t < 20
    assert_healthy(broker)


def tuple_addr(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)
