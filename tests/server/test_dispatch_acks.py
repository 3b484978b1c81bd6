"""When produce acks go out: small requests' acks are held to be sent together,
a large request's ack (and those held before it) at once (issue 18)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pybroker import _core
from pybroker.protocol import decode_response, encode_request
from pybroker.server.dispatch import COALESCE_REQUEST_BYTES
from tests.fuzz.inprocess import ANSWER_TIMEOUT_S, InProcessBroker

TOPIC = "acks-rhythm"
PRODUCE, CREATE_TOPICS = 0, 19


class FlushRecordingConnection:
    """The part of Connection the dispatcher uses; notes whether each response was
    sent at once (flush=True) or held in the queue."""

    def __init__(self) -> None:
        self.peer = "127.0.0.1:40000"
        self.writes: list[tuple[bytes, bool]] = []
        self.flushes = 0

    async def write(self, parts: Sequence[Any], *, flush: bool = True) -> None:
        self.writes.append((b"".join(bytes(p) for p in parts), flush))

    async def flush(self) -> None:
        self.flushes += 1

    def request_started(self, received_ms: float) -> None:
        pass

    def request_done(self) -> None:
        pass


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = InProcessBroker(Path(tmp_path_factory.mktemp("acks-rhythm")))
    try:
        resp = b.request(CREATE_TOPICS, 4, {"timeout_ms": 5000, "topics": [
            {"name": TOPIC, "num_partitions": 1, "replication_factor": 1}]})
        assert all(t["error_code"] == 0 for t in resp["topics"]), resp
        b.wait_led([TOPIC])
        yield b
    finally:
        b.close()


def produce_frame(value_bytes: int, correlation_id: int) -> bytes:
    batch = _core.build_batch([None], [os.urandom(value_bytes)], 1_700_000_000_000)
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
    return b"".join(encode_request(PRODUCE, 7, correlation_id, "acks", body))[4:]


@pytest.mark.parametrize(("value_bytes", "held"), [
    (1000, True),                          # a small request's ack waits for its neighbours
    (COALESCE_REQUEST_BYTES + 1000, False),  # a large one's goes out at once
])
def test_produce_ack_is_held_only_for_small_requests(
        broker: InProcessBroker, value_bytes: int, held: bool) -> None:
    frame = produce_frame(value_bytes, 7)
    assert (len(frame) > COALESCE_REQUEST_BYTES) == (not held)
    conn = FlushRecordingConnection()
    future = broker.portal.start_task_soon(broker.dispatcher.handle_frame, conn,
                                           memoryview(frame))
    assert future.result(ANSWER_TIMEOUT_S) is True
    ((response, flushed),) = conn.writes
    correlation_id, body = decode_response(PRODUCE, 7, response[4:])
    assert correlation_id == 7
    (part,) = body["responses"][0]["partition_responses"]
    assert part["error_code"] == 0
    assert flushed is not held
