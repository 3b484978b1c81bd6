"""BrokerConnection's framing over a real socket: frames arriving in odd pieces,
bytes of the next frame arriving early, a frame larger than the receive buffer,
and a peer that answers with the wrong correlation id or a nonsense size."""

from __future__ import annotations

import asyncio
import struct
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import pytest

from pybroker.client import transport
from pybroker.client.connection import (
    FRAME_BUFFER_BYTES_INITIAL,
    BrokerConnection,
    BrokerUnreachable,
)

INT32 = struct.Struct(">i")
API_VERSIONS = 18


def response(correlation_id: int, payload: bytes) -> bytes:
    body = INT32.pack(correlation_id) + payload
    return INT32.pack(len(body)) + body


async def read_request(stream: anyio.abc.ByteStream, buffered: bytearray) -> int:
    """Read one request frame; its correlation id."""
    while len(buffered) < 4:
        buffered += await stream.receive()
    (size,) = INT32.unpack_from(buffered)
    while len(buffered) < 4 + size:
        buffered += await stream.receive()
    correlation_id = INT32.unpack_from(buffered, 8)[0]  # after api key and version
    del buffered[:4 + size]
    return correlation_id


Serve = Callable[[anyio.abc.SocketStream], Awaitable[None]]


def run_against(serve: Serve, client: Callable[[BrokerConnection], Awaitable[None]],
                backend_options: dict[str, Any] | None = None) -> None:
    async def main() -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:
            async def handle(stream: anyio.abc.SocketStream) -> None:
                async with stream:
                    await serve(stream)
            tg.start_soon(listener.serve, handle)
            connection = BrokerConnection("127.0.0.1", port, "test", timeout_s=10)
            try:
                await client(connection)
            finally:
                await connection.close()
                tg.cancel_scope.cancel()
    anyio.run(main, backend_options=backend_options)


def test_frames_in_pieces_and_early_bytes_of_the_next_one() -> None:
    big = bytes(range(256)) * (3 * FRAME_BUFFER_BYTES_INITIAL // 256)  # past the first buffer

    async def serve(stream: anyio.abc.SocketStream) -> None:
        buffered = bytearray()
        first = await read_request(stream, buffered)
        one = response(first, b"a" * 1000)
        two = response(first + 1, b"b" * 10)
        # the size prefix split, then the rest of frame one with frame two's start
        await stream.send(one[:2])
        await anyio.sleep(0.01)
        await stream.send(one[2:] + two[:7])
        await stream.send(two[7:])
        second = await read_request(stream, buffered)
        assert second == first + 1
        three = response(second + 1, big)
        await read_request(stream, buffered)
        for i in range(0, len(three), 100_000):
            await stream.send(three[i:i + 100_000])
        await anyio.sleep(5)

    async def client(connection: BrokerConnection) -> None:
        one = await connection.request_frame(API_VERSIONS, 0, {})
        assert bytes(one[4:]) == b"a" * 1000
        two = await connection.request_frame(API_VERSIONS, 0, {})  # already received
        assert bytes(two[4:]) == b"b" * 10
        three = await connection.request_frame(API_VERSIONS, 0, {})
        assert bytes(three[4:]) == big
        # the buffer grew into a new one while a view of the last frame was still held (a
        # resize in place would have raised BufferError); that view is still readable
        assert len(two) == 14 and two.obj is not three.obj

    run_against(serve, client)


def test_a_frame_that_is_all_there_takes_one_receive() -> None:
    """The size prefix is not received on its own: a frame whose bytes have all arrived
    is read with one receive (a syscall and a loop turn fewer per follower round trip,
    issue 26), and a small frame is not held back waiting for more."""
    async def serve(stream: anyio.abc.SocketStream) -> None:
        buffered = bytearray()
        for payload in (b"x" * 5000, b"y" * 5000, b"z"):
            cid = await read_request(stream, buffered)
            await stream.send(response(cid, payload))
        await anyio.sleep(5)

    async def client(connection: BrokerConnection) -> None:
        await connection.request_frame(API_VERSIONS, 0, {})  # connected
        stream = connection._stream
        assert stream is not None
        received: list[int] = []
        receive_into = stream.receive_into

        async def counted(view: memoryview, *need: int | None, **wait: bool) -> int:
            count = await receive_into(view, *need, **wait)
            received.append(count)
            return count

        stream.receive_into = counted  # type: ignore[method-assign]
        frame = await connection.request_frame(API_VERSIONS, 0, {})
        assert bytes(frame[4:]) == b"y" * 5000
        assert received == [5008]
        with anyio.fail_after(5):
            frame = await connection.request_frame(API_VERSIONS, 0, {})
        assert bytes(frame[4:]) == b"z"

    run_against(serve, client)


class CountingSocket:
    """A socket whose reads that find nothing (BlockingIOError) are counted."""

    def __init__(self, sock: object) -> None:
        self._sock = sock
        self.empty_reads = 0

    def recv_into(self, view: memoryview) -> int:
        try:
            return self._sock.recv_into(view)  # type: ignore[attr-defined, no-any-return]
        except BlockingIOError:
            self.empty_reads += 1
            raise

    def __getattr__(self, name: str) -> object:
        return getattr(self._sock, name)


def test_the_answer_is_waited_for_before_it_is_read() -> None:
    """Right after a request goes out its answer is not there: the connection waits for
    the socket before reading, not after a read that finds nothing (one syscall and one
    BlockingIOError fewer per follower round trip, issue 26). Before, every one of these
    requests made such a read. On the broker's loop (uvloop); asyncio's own runs a
    readiness callback queued before a wait began once more, and wakes it early."""
    pytest.importorskip("uvloop")
    requests = 5

    async def serve(stream: anyio.abc.SocketStream) -> None:
        buffered = bytearray()
        cid = await read_request(stream, buffered)
        await stream.send(response(cid, b""))
        for _ in range(requests):
            cid = await read_request(stream, buffered)
            await anyio.sleep(0.05)  # the client is waiting by now
            await stream.send(response(cid, b"w" * 3000))
        await anyio.sleep(5)

    async def client(connection: BrokerConnection) -> None:
        await connection.request_frame(API_VERSIONS, 0, {})  # connected
        stream = connection._stream
        assert isinstance(stream, transport.SocketTransport)
        counting = CountingSocket(stream._sock)
        stream._sock = counting  # type: ignore[assignment]
        for _ in range(requests):
            frame = await connection.request_frame(API_VERSIONS, 0, {})
            assert bytes(frame[4:]) == b"w" * 3000
        assert counting.empty_reads < requests // 2

    run_against(serve, client, {"use_uvloop": True})


@pytest.mark.parametrize("answer", [
    lambda cid: response(cid + 1, b""),      # not the request's correlation id
    lambda cid: INT32.pack(2) + b"xx",       # a frame too small to hold one
    lambda cid: INT32.pack(-5),              # a negative size
])
def test_a_nonsense_answer_closes_the_connection(answer: Callable[[int], bytes]) -> None:
    async def serve(stream: anyio.abc.SocketStream) -> None:
        cid = await read_request(stream, bytearray())
        await stream.send(answer(cid))
        await anyio.sleep(5)

    async def client(connection: BrokerConnection) -> None:
        with pytest.raises(BrokerUnreachable):
            await connection.request_frame(API_VERSIONS, 0, {})
        assert connection._stream is None

    run_against(serve, client)


def test_a_refused_connection_is_unreachable() -> None:
    async def main() -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        await listener.aclose()  # nobody listens there now
        connection = BrokerConnection("127.0.0.1", port, "test", timeout_s=10)
        with pytest.raises(BrokerUnreachable):
            await connection.request_frame(API_VERSIONS, 0, {})
    anyio.run(main)


def test_a_request_cancelled_mid_answer_leaves_no_half_frame_behind() -> None:
    async def serve(stream: anyio.abc.SocketStream) -> None:
        buffered = bytearray()
        cid = await read_request(stream, buffered)
        whole = response(cid, b"first" * 100)
        await stream.send(whole[:20])  # the rest would come later, after the cancel
        await anyio.sleep(0.5)
        await stream.send(whole[20:])
        await anyio.sleep(5)

    async def client(connection: BrokerConnection) -> None:
        with anyio.move_on_after(0.2):
            await connection.request_frame(API_VERSIONS, 0, {})
            pytest.fail("the answer came whole")
        assert connection._stream is None  # closed: its late bytes are never read
        # a new connection, a new answer: its start is its own
        second = await connection.request_frame(API_VERSIONS, 0, {})
        assert bytes(second[4:24]) == b"first" * 4

    run_against(serve, client)


def test_the_reader_stays_registered_while_read_and_goes_when_nobody_reads() -> None:
    """A plaintext transport keeps its readiness callback between receives (no register
    and drop per read of a megabyte answer), drops it once the socket turns readable with
    nobody receiving (a readable socket must not wake the loop on every turn), and a
    receive still waiting when the transport closes fails instead of hanging."""
    async def main() -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        accepted: list[anyio.abc.SocketStream] = []
        ready = anyio.Event()

        async def handle(stream: anyio.abc.SocketStream) -> None:
            accepted.append(stream)
            ready.set()
            await anyio.sleep(30)

        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, handle)
            sock = await transport.SocketTransport.connect("127.0.0.1", port)
            with anyio.fail_after(10):
                await ready.wait()
            peer = accepted[0]
            fd = sock._sock.fileno()
            loop = asyncio.get_running_loop()
            buf = bytearray(10)
            for piece in (b"ab", b"cde"):
                async def later(data: bytes = piece) -> None:
                    await anyio.sleep(0.05)
                    await peer.send(data)
                tg.start_soon(later)
                with anyio.fail_after(10):
                    count = await sock.receive_into(memoryview(buf))
                assert bytes(buf[:count]) == piece
            assert sock._readable.registered  # still registered between receives
            await peer.send(b"unasked")
            with anyio.fail_after(10):
                while sock._readable.registered:
                    await anyio.sleep(0.01)
            assert not loop.remove_reader(fd)
            with anyio.fail_after(10):
                assert await sock.receive_into(memoryview(buf)) == 7

            async def close_soon() -> None:
                await anyio.sleep(0.05)
                await sock.aclose()
            tg.start_soon(close_soon)
            with anyio.fail_after(10), pytest.raises(anyio.ClosedResourceError):
                await sock.receive_into(memoryview(buf))
            assert not loop.remove_reader(fd)
            tg.cancel_scope.cancel()
    anyio.run(main)


def test_a_request_past_its_timeout_is_unreachable_and_the_next_one_starts_afresh() -> None:
    answered = 0

    async def serve(stream: anyio.abc.SocketStream) -> None:
        nonlocal answered
        buffered = bytearray()
        cid = await read_request(stream, buffered)
        if answered == 0:
            answered += 1
            await anyio.sleep(30)  # never answers this one
            return
        await stream.send(response(cid, b"second"))

    async def client(connection: BrokerConnection) -> None:
        started = anyio.current_time()
        with pytest.raises(BrokerUnreachable, match="TimeoutError"):
            await connection.request_frame(API_VERSIONS, 0, {}, timeout_s=0.3)
        assert anyio.current_time() - started < 10
        assert connection._stream is None  # closed: a late answer is never read
        with anyio.fail_after(10):
            frame = await connection.request_frame(API_VERSIONS, 0, {})
        assert bytes(frame[4:]) == b"second"

    run_against(serve, client)


def serve_every_request(payload: bytes) -> Serve:
    async def serve(stream: anyio.abc.SocketStream) -> None:
        buffered = bytearray()
        while True:
            cid = await read_request(stream, buffered)
            await stream.send(response(cid, payload))
    return serve


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 keeps anyio.fail_after")
def test_requests_share_one_loop_timer() -> None:
    """A fetcher's request per round trip arms no loop timer of its own (issue 26): the
    connection's one timer serves them all."""
    async def client(connection: BrokerConnection) -> None:
        loop = asyncio.get_running_loop()
        armed = 0
        call_at = loop.call_at

        def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal armed
            armed += 1
            return call_at(*args, **kwargs)

        loop.call_at = counting  # type: ignore[method-assign]
        try:
            for _ in range(200):
                frame = await connection.request_frame(API_VERSIONS, 0, {})
                assert bytes(frame[4:]) == b"ok"
        finally:
            del loop.call_at  # type: ignore[method-assign]
        assert armed <= 2, armed

    run_against(serve_every_request(b"ok"), client)


def test_a_shorter_limit_after_a_longer_one_still_ends_the_request() -> None:
    """The timer armed for a long request is brought forward for a later, shorter one."""
    requests = 0

    async def serve(stream: anyio.abc.SocketStream) -> None:
        nonlocal requests
        buffered = bytearray()
        while True:
            cid = await read_request(stream, buffered)
            requests += 1
            if requests == 2:
                await anyio.sleep(30)  # never answers the second
                return
            await stream.send(response(cid, b"ok"))

    async def client(connection: BrokerConnection) -> None:
        await connection.request_frame(API_VERSIONS, 0, {}, timeout_s=20)
        started = anyio.current_time()
        with pytest.raises(BrokerUnreachable, match="TimeoutError"):
            await connection.request_frame(API_VERSIONS, 0, {}, timeout_s=0.3)
        assert anyio.current_time() - started < 10

    run_against(serve, client)


def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    """Cancelled by its caller (not by its limit), a request is cancelled, not timed out,
    and the limit of the next request still holds."""
    async def serve(stream: anyio.abc.SocketStream) -> None:
        buffered = bytearray()
        await read_request(stream, buffered)
        await anyio.sleep(30)  # never answers

    async def client(connection: BrokerConnection) -> None:
        with anyio.move_on_after(0.2) as scope:
            await connection.request_frame(API_VERSIONS, 0, {}, timeout_s=20)
        assert scope.cancelled_caught
        assert connection._stream is None
        # the old timer (20 s) must not let the next request run past its own 0.3 s
        started = anyio.current_time()
        with pytest.raises(BrokerUnreachable, match="TimeoutError"):
            await connection.request_frame(API_VERSIONS, 0, {}, timeout_s=0.3)
        assert anyio.current_time() - started < 10

    run_against(serve, client)
