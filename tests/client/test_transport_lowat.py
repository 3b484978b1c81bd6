"""The plaintext transport waits for the rest of a large frame in one wake-up
(SO_RCVLOWAT), and a small read after it is not held back by the raised mark."""

from __future__ import annotations

import anyio
import anyio.abc

from pybroker.client import transport

PIECE = 64 << 10
PIECES = 16
#: between pieces: each would wake a reader that takes whatever has arrived
GAP_S = 0.02


class CountingWaiter:
    """Stands in for the transport's readiness waiter and counts the waits."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.waits = 0

    async def wait(self) -> None:
        self.waits += 1
        await self.inner.wait()  # type: ignore[attr-defined]

    def fail(self, exc: BaseException) -> None:
        self.inner.fail(exc)  # type: ignore[attr-defined]


async def receive_exactly(stream: transport.SocketTransport, view: memoryview) -> None:
    have = 0
    while have < len(view):
        have += await stream.receive_into(view[have:])


def test_a_large_frame_arriving_in_pieces_wakes_the_reader_once_or_twice() -> None:
    payload = bytes(range(256)) * (PIECES * PIECE // 256)
    tail = b"next"

    async def serve(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            for i in range(PIECES):
                await stream.send(payload[i * PIECE:(i + 1) * PIECE])
                await anyio.sleep(GAP_S)
            await stream.send(tail)
            await anyio.sleep(5)  # keeps the connection open: the tail must not need EOF

    async def main() -> tuple[int, bytes, bytes]:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, serve)
            stream = await transport.SocketTransport.connect("127.0.0.1", port)
            waiter = CountingWaiter(stream._readable)
            stream._readable = waiter  # type: ignore[assignment]
            try:
                with anyio.fail_after(10):
                    body = bytearray(len(payload))
                    await receive_exactly(stream, memoryview(body))
                    big_waits = waiter.waits
                    small = bytearray(len(tail))
                    await receive_exactly(stream, memoryview(small))
            finally:
                await stream.aclose()
                tg.cancel_scope.cancel()
        return big_waits, bytes(body), bytes(small)

    waits, body, small = anyio.run(main)
    assert body == payload
    assert small == tail
    # a wake-up per piece without the mark (16 pieces, 20 ms apart); with it, the first
    # wait may see the first piece alone, the second the rest
    assert waits <= 3, waits
