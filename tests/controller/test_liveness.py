"""controller/liveness.py: a listener that refuses connections means the process is
gone; one that accepts (even without ever answering), or that drops connections
while still listening, proves nothing."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import anyio
import pytest

from pybroker.controller import liveness
from pybroker.controller.liveness import LivenessWatch, until_gone, until_reachable

pytestmark = pytest.mark.anyio
WAIT_S = 10.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening socket that never accepts: like a paused process, the kernel
    completes the connections anyway."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock
    sock.close()


async def test_a_listener_that_accepts_is_not_gone(listener: socket.socket) -> None:
    host, port = listener.getsockname()
    with anyio.move_on_after(1.0) as scope:
        await until_gone(host, port)
    assert scope.cancelled_caught


async def test_a_closed_listener_is_gone_at_once(listener: socket.socket) -> None:
    host, port = listener.getsockname()
    async with anyio.create_task_group() as tg:
        done = anyio.Event()

        async def watch() -> None:
            await until_gone(host, port)
            done.set()

        tg.start_soon(watch)
        await anyio.sleep(0.3)  # connected and idle by now
        assert not done.is_set()
        listener.close()  # the held connection stays in the backlog: the kernel resets it
        with anyio.fail_after(WAIT_S):
            await done.wait()


async def test_dropped_connections_on_a_live_listener_prove_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A listener that accepts and closes at once (an idle reaper, a proxy) is there."""
    monkeypatch.setattr(liveness, "RECONNECT_MIN_S", 0.05)
    accepted = 0

    async def close_at_once(stream: anyio.abc.SocketStream) -> None:
        nonlocal accepted
        accepted += 1
        await stream.aclose()

    server = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = server.extra(anyio.abc.SocketAttribute.local_port)
    async with server, anyio.create_task_group() as tg:
        tg.start_soon(server.serve, close_at_once)
        with anyio.move_on_after(1.0) as scope:
            await until_gone("127.0.0.1", port)
        assert scope.cancelled_caught
        assert accepted >= 3  # it kept looking
        tg.cancel_scope.cancel()


async def test_the_watch_reports_gone_then_back(listener: socket.socket,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(liveness, "RECONNECT_MIN_S", 0.05)
    host, port = listener.getsockname()
    events: list[tuple[str, int, int]] = []
    watch = LivenessWatch(lambda b, e: events.append(("gone", b, e)),
                          lambda b, e: events.append(("back", b, e)))
    watch.watch({(3, 42): (host, port)})  # before run(): kept until it starts
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch.run)
        await anyio.sleep(0.3)
        assert events == []
        listener.close()
        with anyio.fail_after(WAIT_S):
            while events != [("gone", 3, 42)]:
                await anyio.sleep(0.02)
        again = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind((host, port))
        again.listen(16)
        try:
            with anyio.fail_after(WAIT_S):
                while events != [("gone", 3, 42), ("back", 3, 42)]:
                    await anyio.sleep(0.02)
                await until_reachable(host, port)
        finally:
            again.close()
        watch.clear()
        tg.cancel_scope.cancel()


async def test_a_failing_callback_does_not_end_the_watch(listener: socket.socket,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The store may be unreachable when a broker is found gone: that is logged, and the
    task group hosting the watchers (the broker's) goes on."""
    monkeypatch.setattr(liveness, "RECONNECT_MIN_S", 0.05)
    host, port = listener.getsockname()
    calls: list[str] = []

    def unreachable(broker_id: int, epoch: int) -> None:
        calls.append("gone")
        raise ConnectionError("the store is away")

    watch = LivenessWatch(unreachable, lambda b, e: calls.append("back"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch.run)
        watch.watch({(1, 1): (host, port)})
        await anyio.sleep(0.2)
        listener.close()
        with anyio.fail_after(WAIT_S):
            while calls != ["gone"]:
                await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
