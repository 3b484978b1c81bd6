"""`_core.FetchChannel`: the follower's Fetch round trip in Rust (issue 26). Its request
bytes are checked against the Python codec's (the one declaration of the message), its
receive against a real socket with the answer in pieces, and its apply against
apply_fetch_response's appends."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

_core = pytest.importorskip("pybroker._core")

from pybroker import protocol  # noqa: E402
from pybroker._core import FetchChannel, PartitionLog  # noqa: E402
from tests.core.test_apply_fetch_response import answer, batch, frame  # noqa: E402

FETCH = 1
VERSION = 12
LIMIT = 256 << 20


def python_encoded(correlation_id: int, client_id: str, body: dict[str, Any]) -> bytes:
    return b"".join(bytes(p) for p in protocol.encode_request(FETCH, VERSION, correlation_id,
                                                              client_id, body))


def part(index: int, offset: int, **extra: int) -> dict[str, int]:
    return {"partition": index, "current_leader_epoch": 4, "fetch_offset": offset,
            "log_start_offset": 0, "partition_max_bytes": 1 << 20, **extra}


FIXED = {"replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 10 << 20,
         "isolation_level": 0, "rack_id": ""}

BODIES = [
    # a session's first fetch: every partition, nothing forgotten
    FIXED | {"session_id": 0, "session_epoch": 0, "forgotten_topics_data": [],
             "topics": [{"topic": "t", "partitions": [part(0, 0), part(1, 123456789012)]},
                        {"topic": "ü-topic", "partitions": [part(7, 5)]}]},
    # an incremental one: a moved partition and forgotten ones
    FIXED | {"session_id": 991, "session_epoch": 17, "rack_id": "rack-a",
             "topics": [{"topic": "t", "partitions": [part(1, 9, last_fetched_epoch=3)]}],
             "forgotten_topics_data": [{"topic": "t", "partitions": [0, 2]},
                                       {"topic": "gone", "partitions": [5]}]},
    # nothing moved: no topics at all
    FIXED | {"session_id": 991, "session_epoch": 18, "topics": [],
             "forgotten_topics_data": []},
    # the schema's defaults (replica_id, max_bytes, session_epoch, the partitions' epochs)
    {"max_wait_ms": 0, "min_bytes": 0, "isolation_level": 1, "rack_id": "",
     "session_id": 0, "forgotten_topics_data": [],
     "topics": [{"topic": "d", "partitions": [
         {"partition": 3, "fetch_offset": 1, "partition_max_bytes": 100}]}]},
]


@pytest.mark.parametrize("body", BODIES)
def test_the_request_is_the_python_codecs_byte_for_byte(body: dict[str, Any]) -> None:
    channel = FetchChannel("broker-2-fetcher-0", LIMIT)
    assert channel.encode_fetch(41, body) == python_encoded(41, "broker-2-fetcher-0", body)


def test_a_request_missing_a_required_field_is_refused() -> None:
    body = dict(BODIES[0])
    del body["max_wait_ms"]
    with pytest.raises(ValueError, match="max_wait_ms"):
        FetchChannel("c", LIMIT).encode_fetch(1, body)
    with pytest.raises(ValueError, match="cluster_id"):
        FetchChannel("c", LIMIT).encode_fetch(1, BODIES[0] | {"cluster_id": "x"})


def test_an_answer_in_pieces_is_read_then_applied(tmp_path: Path) -> None:
    log = PartitionLog(str(tmp_path / "t-0"))
    records = batch(0, 3) + batch(3, 2)
    data = frame({"t": [answer(0, records, hw=4)]}, correlation_id=9)
    whole = len(data).to_bytes(4, "big") + data
    ours, leader = socket.socketpair()
    ours.setblocking(False)
    channel = FetchChannel("c", LIMIT)
    channel.encode_fetch(9, BODIES[2])  # a round starts
    try:
        assert channel.receive(ours.fileno()) == 4  # nothing there yet
        # a socketpair's bytes are there once sendall returns
        leader.sendall(whole[:3])
        assert channel.receive(ours.fileno()) == 1  # the prefix's last byte
        leader.sendall(whole[3:40])
        assert channel.receive(ours.fileno()) == len(whole) - 40
        leader.sendall(whole[40:])
        assert channel.receive(ours.fileno()) == 0
        assert channel.receive(ours.fileno()) == 0  # whole: nothing more is read
        applied = channel.apply(9, {("t", 0): log})
    finally:
        ours.close()
        leader.close()
    (p,) = applied.partitions
    assert (p.appended, p.record_count, p.log_end_offset, p.high_watermark) == (True, 5, 5, 4)
    assert log.log_end_offset == 5
    assert applied.session_id == 77


def test_a_wrong_correlation_id_bytes_past_the_answer_and_a_close_fail(tmp_path: Path) -> None:
    log = PartitionLog(str(tmp_path / "t-0"))
    data = frame({"t": [answer(0, batch(0, 1), hw=1)]}, correlation_id=9)
    whole = len(data).to_bytes(4, "big") + data
    channel = FetchChannel("c", LIMIT)
    ours, leader = socket.socketpair()
    ours.setblocking(False)
    try:
        leader.sendall(whole)
        assert channel.receive(ours.fileno()) == 0
        with pytest.raises(ConnectionError, match="correlation id"):
            channel.apply(10, {("t", 0): log})
        assert log.log_end_offset == 0  # nothing appended
        with pytest.raises(ConnectionError, match="no whole"):
            channel.apply(9, {("t", 0): log})  # nothing held any more
        leader.sendall(whole + whole)  # two answers to one request: a broken peer
        with pytest.raises(OSError, match="past the answer"):
            channel.receive(ours.fileno())
        channel.encode_fetch(11, BODIES[2])
        leader.close()
        with pytest.raises(OSError, match="closed"):
            channel.receive(ours.fileno())
    finally:
        ours.close()
        leader.close()


def test_a_size_past_the_limit_is_refused() -> None:
    channel = FetchChannel("c", 1000)
    ours, leader = socket.socketpair()
    ours.setblocking(False)
    try:
        leader.sendall((1001).to_bytes(4, "big"))
        with pytest.raises(OSError, match="response size 1001"):
            channel.receive(ours.fileno())
    finally:
        ours.close()
        leader.close()
