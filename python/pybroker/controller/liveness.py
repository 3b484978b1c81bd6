"""Is a broker's process still there? Seen from the outside, without waiting for
its ZooKeeper session to expire.

A process killed (kill -9, a crash, the OOM killer) has its sockets closed by the
kernel at once: a connection to it ends, and a new one to its listener is
refused (RST) because nothing listens on that port any more. A paused or busy
process, or one behind a slow or cut network, looks different: connections are
still accepted by the kernel (or time out), never refused. So a watcher keeps one
idle TCP connection to the broker's inter-broker listener and, when it ends, tries
a new one at once: refused from every address the host resolves to means the
process is gone. Anything else (accepted, timed out, unreachable, unresolvable)
proves nothing and is left to the session timeout, as before.

The watcher never sends a byte: a broker does not speak first, so the connection
costs nothing while the broker lives. What the conclusion is used for, and why
acting on it cannot make two leaders acknowledge writes for one partition, is in
controller/controller.py."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable

import anyio

log = logging.getLogger(__name__)

#: a connection attempt that takes longer proves nothing (the host may be away)
CONNECT_TIMEOUT_S = 5.0
#: a refusal is checked once more after this pause before the process counts as gone
CONFIRM_S = 0.05
#: connections that keep ending quickly (a proxy, an idle reaper) are re-made at most
#: this often; the first attempt after an end is always immediate
RECONNECT_MIN_S = 1.0

Endpoint = tuple[str, int]


async def _attempt(host: str, port: int) -> tuple[asyncio.StreamReader,
                                                  asyncio.StreamWriter] | bool | None:
    """One connection attempt to every address of host: the open connection; False
    when every address refused it; None when nothing can be concluded."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return None
    refused = 0
    for family, _, _, _, address in infos:
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_S):
                return await asyncio.open_connection(address[0], address[1], family=family)
        except ConnectionRefusedError:
            refused += 1
        except (OSError, TimeoutError):
            pass
    return False if infos and refused == len(infos) else None


async def until_gone(host: str, port: int,
                     concluded: Callable[[], None] | None = None) -> None:
    """Return once nothing listens on host:port any more (the process behind it is
    gone); until then hold an idle connection to it, re-made whenever it ends.
    `concluded` is called once the first look found it there or proved nothing."""
    while True:
        outcome = await _attempt(host, port)
        if outcome is False:
            await anyio.sleep(CONFIRM_S)
            outcome = await _attempt(host, port)
            if outcome is False:
                return
        if concluded is not None:
            concluded()
            concluded = None
        if not outcome:
            await anyio.sleep(RECONNECT_MIN_S)
            continue
        reader, writer = outcome
        opened = time.monotonic()
        try:
            while await reader.read(4096):
                pass  # a broker never speaks first; nothing to read
        except OSError:
            pass
        finally:
            writer.close()
        lived = time.monotonic() - opened
        if lived < RECONNECT_MIN_S:
            # ended at once: check at once whether the process is gone, but make
            # connections that keep ending no more often than this
            outcome = await _attempt(host, port)
            if outcome is False:
                continue  # confirmed by the loop's first attempt
            if outcome:
                outcome[1].close()
            await anyio.sleep(RECONNECT_MIN_S - lived)


async def until_reachable(host: str, port: int) -> None:
    """Return once a connection to host:port is accepted again."""
    while True:
        outcome = await _attempt(host, port)
        if outcome:
            outcome[1].close()
            return
        await anyio.sleep(RECONNECT_MIN_S)


Callback = Callable[[int, int], Awaitable[None] | None]


class LivenessWatch:
    """One watcher task per watched (broker id, broker epoch): `on_gone(id, epoch)`
    runs when that broker's listener is found gone (without `on_back`: again every
    RECONNECT_MIN_S while it stays gone), then `on_back(id, epoch)` if it accepts
    connections again (nothing proves a process gone for good: a listener
    refused by mistake, say a firewall's reject, must not fence a broker forever).
    `watch()` says what to watch now; watchers of anything else are cancelled."""

    def __init__(self, on_gone: Callback, on_back: Callback | None = None) -> None:
        self.on_gone = on_gone
        self.on_back = on_back
        self._wanted: set[tuple[int, int, Endpoint]] = set()
        self._scopes: dict[tuple[int, int, Endpoint], anyio.CancelScope] = {}
        #: set once a watcher's first look is done (and on_gone has run if it was gone)
        self._looked: dict[tuple[int, int, Endpoint], anyio.Event] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    async def run(self) -> None:
        """Host the watchers, until cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self._sync()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            self._scopes.clear()

    def watch(self, targets: dict[tuple[int, int], Endpoint]) -> None:
        """Watch exactly these (broker id, epoch) -> (host, port), from now on (or from
        when run() starts)."""
        self._wanted = {(b, e, endpoint) for (b, e), endpoint in targets.items()}
        self._sync()

    def clear(self) -> None:
        self.watch({})

    async def first_looks(self) -> None:
        """Return once every watched broker has had its first look: found there, found
        gone (on_gone has run), or inconclusive (say, a connection attempt timed out).
        A new controller waits for this, bounded, before its first pass over the
        partitions, so that a broker killed with it is out of that pass already
        instead of costing a second one."""
        for key in sorted(self._wanted):
            looked = self._looked.setdefault(key, anyio.Event())
            await looked.wait()

    def _sync(self) -> None:
        for key in [k for k in self._scopes if k not in self._wanted]:
            self._scopes.pop(key).cancel()
        for key in [k for k in self._looked if k not in self._wanted]:
            self._looked.pop(key).set()  # not watched any more: nothing to wait for
        if self._tg is None:
            return
        for key in self._wanted - self._scopes.keys():
            scope = self._scopes[key] = anyio.CancelScope()
            self._tg.start_soon(self._watch_one, key, scope)

    async def _watch_one(self, key: tuple[int, int, Endpoint], scope: anyio.CancelScope
                         ) -> None:
        broker_id, epoch, (host, port) = key
        looked = self._looked.setdefault(key, anyio.Event())
        with scope:
            while True:
                await until_gone(host, port, looked.set)
                log.warning("broker %d (epoch %d): nothing listens on %s:%d any more; its "
                            "process is gone (its partitions get other leaders; start it "
                            "again and it rejoins)", broker_id, epoch, host, port)
                await _call(self.on_gone, broker_id, epoch)
                looked.set()
                if self.on_back is None:
                    # nothing to undo: look again a moment later, acting again if it is
                    # still gone (the action may have failed: the store unreachable)
                    await anyio.sleep(RECONNECT_MIN_S)
                    continue
                await until_reachable(host, port)
                log.warning("broker %d (epoch %d): %s:%d accepts connections again",
                            broker_id, epoch, host, port)
                await _call(self.on_back, broker_id, epoch)


async def _call(callback: Callback, broker_id: int, epoch: int) -> None:
    """Run a callback; what it raises is logged (the store may be unreachable just
    then), never let out: the broker's task group must not end for it."""
    try:
        result = callback(broker_id, epoch)
        if result is not None:
            await result
    except Exception:
        log.exception("acting on broker %d (epoch %d) failed; done again when its state "
                      "next changes, or when its ZooKeeper session ends", broker_id, epoch)
