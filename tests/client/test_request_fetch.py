"""BrokerConnection.request_fetch over a real socket: the replica Fetch encoded, its
answer read and applied in Rust (_core.FetchChannel, issue 26), on the broker's loop;
an answer in pieces, a malformed one, and one cut off by a cancel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

_core = pytest.importorskip("pybroker._core")

from pybroker import protocol  # noqa: E402
from pybroker.client.connection import BrokerConnection, BrokerUnreachable  # noqa: E402
from tests.client.test_connection import run_against  # noqa: E402
from tests.core.test_apply_fetch_response import answer, batch, frame  # noqa: E402

BODY = {"replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 10 << 20,
        "isolation_level": 0, "rack_id": "", "session_id": 0, "session_epoch": 0,
        "forgotten_topics_data": [],
        "topics": [{"topic": "t", "partitions": [{
            "partition": 0, "current_leader_epoch": 4, "fetch_offset": 0,
            "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]}


async def read_fetch(stream: anyio.abc.ByteStream) -> tuple[int, dict[str, Any]]:
    """One request, decoded by the Python codec: its correlation id and body."""
    buffered = bytearray()
    while len(buffered) < 4 or len(buffered) < 4 + int.from_bytes(buffered[:4], "big"):
        buffered += await stream.receive()
    header, body = protocol.decode_request(memoryview(bytes(buffered[4:])))
    assert (header.api_key, header.api_version) == (1, 12)
    return header.correlation_id, body


def framed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def test_a_fetch_answered_in_pieces_is_applied(tmp_path: Path) -> None:
    log = _core.PartitionLog(str(tmp_path / "t-0"))
    asked: list[dict[str, Any]] = []

    async def serve(stream: anyio.abc.SocketStream) -> None:
        for n in range(3):
            cid, body = await read_fetch(stream)
            asked.append(body)
            whole = framed(frame({"t": [answer(0, batch(2 * n, 2), hw=2 * n)]},
                                 correlation_id=cid))
            for i in range(0, len(whole), 7):  # in small pieces, a loop turn apart
                await stream.send(whole[i:i + 7])
                await anyio.sleep(0.001)
        await anyio.sleep(5)

    async def client(connection: BrokerConnection) -> None:
        for n in range(3):
            applied = await connection.request_fetch(
                BODY, lambda: {("t", 0): log}, timeout_s=10)
            (p,) = applied.partitions
            assert (p.appended, p.log_end_offset, p.high_watermark) == (True, 2 * n + 2, 2 * n)

    run_against(serve, client, {"use_uvloop": True})
    assert log.log_end_offset == 6
    assert asked[0]["topics"][0]["partitions"][0]["fetch_offset"] == 0
    assert asked[0]["replica_id"] == 2 and asked[0]["session_epoch"] == 0


def test_a_malformed_answer_closes_the_connection_and_appends_nothing(tmp_path: Path) -> None:
    log = _core.PartitionLog(str(tmp_path / "t-0"))

    async def serve(stream: anyio.abc.SocketStream) -> None:
        cid, _ = await read_fetch(stream)
        data = frame({"t": [answer(0, batch(0, 2), hw=0)]}, correlation_id=cid)
        await stream.send(framed(data[:-9]))  # its last partition cut short
        await anyio.sleep(5)

    async def client(connection: BrokerConnection) -> None:
        with pytest.raises(BrokerUnreachable):
            await connection.request_fetch(BODY, lambda: {("t", 0): log}, timeout_s=10)
        assert connection._stream is None

    run_against(serve, client, {"use_uvloop": True})
    assert log.log_end_offset == 0


def test_a_fetch_cancelled_mid_answer_leaves_no_half_answer_behind(tmp_path: Path) -> None:
    log = _core.PartitionLog(str(tmp_path / "t-0"))

    async def serve(stream: anyio.abc.SocketStream) -> None:
        cid, _ = await read_fetch(stream)
        whole = framed(frame({"t": [answer(0, batch(0, 2), hw=0)]}, correlation_id=cid))
        await stream.send(whole[:30])  # the rest never comes on this connection

    async def serve_all(stream: anyio.abc.SocketStream) -> None:
        if not served:
            served.append(True)
            await serve(stream)
            await anyio.sleep(5)
            return
        cid, _ = await read_fetch(stream)
        await stream.send(framed(frame({"t": [answer(0, batch(0, 3), hw=1)]},
                                       correlation_id=cid)))
        await anyio.sleep(5)

    served: list[bool] = []

    async def client(connection: BrokerConnection) -> None:
        with anyio.move_on_after(0.3):
            await connection.request_fetch(BODY, lambda: {("t", 0): log}, timeout_s=10)
            pytest.fail("the answer came whole")
        assert connection._stream is None
        applied = await connection.request_fetch(BODY, lambda: {("t", 0): log}, timeout_s=10)
        (p,) = applied.partitions
        assert (p.appended, p.record_count, p.log_end_offset) == (True, 3, 3)

    run_against(serve_all, client, {"use_uvloop": True})
