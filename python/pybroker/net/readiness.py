"""Waiting for a non-blocking socket to turn readable or writable, for the connections
that do their own socket I/O (the server's client connections, the inter-broker client's
plaintext transport).

The loop's callback stays registered from one wait to the next: registering and dropping
it on every wait, as anyio.wait_readable / wait_writable do, cost five epoll_ctl and an
ioctl per request at 16k requests/s (issue 18), and through anyio's backend lookup and
Event a sixth of the brokers' Python at RF 3 and a third of a leader's Python per follower
fetch (issue 26).

When the callback fires with nobody waiting: a read waiter drops it (a pipelined request
arriving during a handler) unless its on_idle hook took the bytes, so a level-triggered
readable socket nobody reads never spins the loop; a write waiter keeps it, because its
sender is about to run (woken already) and drops it with `stop` once its queued bytes are
out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class ReadinessWaiter:
    __slots__ = ("_fd", "_writable", "_loop", "_waiter", "_on_idle")

    def __init__(self, fd: int, *, writable: bool = False,
                 on_idle: Callable[[], bool] | None = None) -> None:
        self._fd = fd
        #: a read waiter's callback fired with nobody waiting calls this first: True keeps
        #: the registration (it read the bytes; pybroker.server.connection reads ahead)
        self._on_idle = on_idle
        self._writable = writable
        #: the loop the callback is registered with (None: not registered)
        self._loop: asyncio.AbstractEventLoop | None = None
        #: the future a wait is on (None: nobody waits)
        self._waiter: asyncio.Future[None] | None = None

    @property
    def registered(self) -> bool:
        """Whether the readiness callback is registered with a loop now."""
        return self._loop is not None

    @property
    def waiting(self) -> bool:
        """Whether a wait is in progress."""
        return self._waiter is not None

    async def wait(self) -> None:
        """Until the socket is ready (or at EOF or in error, for the I/O to see)."""
        waiter = self._waiter = self._register().create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def register(self) -> None:
        """Register the callback without waiting (for on_idle to be called)."""
        self._register()

    def _register(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            loop = asyncio.get_running_loop()
            if self._writable:
                loop.add_writer(self._fd, self._on_ready)
            else:
                loop.add_reader(self._fd, self._on_ready)
            self._loop = loop
        return loop

    def _on_ready(self) -> None:
        waiter = self._waiter
        if waiter is None:
            if not self._writable and (self._on_idle is None or not self._on_idle()):
                self.stop()
        elif not waiter.done():
            waiter.set_result(None)
        # else: woken already, its task runs on its next step (a loop that polls again
        # before running it, as asyncio's own does, calls back once more)

    def stop(self) -> None:
        """Drop the registration (before the fd is closed, and maybe reused)."""
        loop, self._loop = self._loop, None
        if loop is not None:
            if self._writable:
                loop.remove_writer(self._fd)
            else:
                loop.remove_reader(self._fd)

    def hand_over(self) -> None:
        """Forget the registration without removing it: the caller is about to register
        its own callback for the fd, which replaces this one."""
        self._loop = None

    def fail(self, exc: BaseException) -> None:
        """Drop the registration and make a wait in progress raise `exc` (the socket is
        being closed under it)."""
        self.stop()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


async def wait_either(first: ReadinessWaiter, second: ReadinessWaiter) -> None:
    """Until either waiter's socket is ready: a sender blocked on a full send buffer
    that must also see its socket turn readable (pybroker.server.connection reads
    ahead meanwhile). Neither may have a wait of its own in progress."""
    assert first._waiter is None and second._waiter is None
    loop = first._register()
    second._register()
    waiter = first._waiter = second._waiter = loop.create_future()
    try:
        await waiter
    finally:
        first._waiter = second._waiter = None
