"""The read path keeps its readiness callback registered between reads (issue 18): no
epoll_ctl per request on the broker's loop (uvloop), and no busy loop on any loop when
bytes arrive while nobody reads."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest

from pybroker.net.readiness import ReadinessWaiter
from pybroker.server.connection import Connection

uvloop = pytest.importorskip("uvloop")


#: a request larger than Connection's COPY_FRAME_BYTES
LARGE = b"first" + bytes(5000)


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


async def _turns(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop, asyncio.new_event_loop],
                         ids=["uvloop", "asyncio"])
def test_reader_stays_registered_while_reading_and_drops_when_nobody_reads(
        monkeypatch: pytest.MonkeyPatch,
        loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> None:
    # the broker's loop runs a woken reader before it polls again, so the registration
    # survives a read; asyncio's own loop polls once more first and sees the readiness
    # the read is about to consume, which drops it (a cost, not a fault)
    broker_loop = loop_factory is uvloop.new_event_loop
    calls = 0
    original = ReadinessWaiter._on_ready

    def counting(self: ReadinessWaiter) -> None:
        nonlocal calls
        calls += 1
        original(self)

    monkeypatch.setattr(ReadinessWaiter, "_on_ready", counting)

    async def scenario() -> None:
        nonlocal calls
        ours, peer = socket.socketpair()
        conn = Connection(ours, 1 << 20)
        try:
            reading = asyncio.ensure_future(conn.read_frame())
            await _turns()
            assert conn._readable.registered  # waiting: registered
            # a request too large to read the next ahead of (see Connection._read_ahead_idle)
            peer.sendall(frame(LARGE))
            assert bytes(await asyncio.wait_for(reading, 5)) == LARGE
            if broker_loop:
                # answered without dropping the registration: the next wait is free
                assert conn._readable.registered
            # a request arrives while the connection is busy elsewhere (nobody reads):
            # at most a callback or two, then the socket is no longer watched, however
            # long it stays readable
            calls = 0
            peer.sendall(frame(b"second"))
            await _turns(50)
            assert calls <= 2, f"{calls} callbacks for one unread request"
            assert not conn._readable.registered
            # the next read finds the bytes and registers again only when it must wait
            assert bytes(await asyncio.wait_for(conn.read_frame(), 5)) == b"second"
            reading = asyncio.ensure_future(conn.read_frame())
            await _turns()
            assert conn._readable.registered
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            # after a small request, one arriving while the connection is busy is read
            # ahead: the callback stays, and the socket, drained, does not call it again
            calls = 0
            peer.sendall(frame(b"third"))
            await _turns(50)
            assert calls <= 2, f"{calls} callbacks for one request read ahead"
            assert conn._ahead == frame(b"third")
            assert conn._readable.registered
            assert bytes(await asyncio.wait_for(conn.read_frame(), 5)) == b"third"
            assert conn._ahead is None
        finally:
            conn.close()
            peer.close()
        assert not conn._readable.registered  # closing unregistered the fd

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(scenario())
