"""Where watch callbacks run: one task on the event loop, one job at a time.

Both backends hand every callback to a Dispatcher, so callbacks behave the same
whichever backend is in use: they run on the event loop (never on kazoo's threads),
in the order the changes were seen, one at a time; a callback may be a plain function
or a coroutine function (awaited before the next job starts). A slow callback delays
the others, and a callback must not wait for another watch to fire (it would wait
for itself). An exception in a callback is logged and the next job runs.

Jobs may be submitted from any thread (kazoo calls its watchers and listeners on its
own threads); they are moved to the loop with call_soon_threadsafe. The loop must be
asyncio's (anyio's asyncio backend, uvloop included)."""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from pybroker.errors import BUG_REPORT

log = logging.getLogger(__name__)

#: a watch callback: a function or coroutine function; its return value is ignored
Callback = Callable[..., Awaitable[None] | None]
Job = Callable[[], Awaitable[None] | None]


class WatchHandle:
    """Returned by every watch_* / on_session_* call; cancel() stops the callbacks."""

    def __init__(self, on_cancel: Callable[[], None] | None = None) -> None:
        self._on_cancel = on_cancel
        self.cancelled = False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            if self._on_cancel is not None:
                self._on_cancel()


async def invoke(callback: Callback, *args: Any) -> None:
    """Call `callback`, awaiting it if it is a coroutine; log what it raises."""
    try:
        result = callback(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:  # a watcher's bug must not stop the other watchers
        log.exception("coordination callback %r failed: this broker may miss that change "
                      "until the next one; restarting it reads everything again. " + BUG_REPORT,
                      callback)


class Dispatcher:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._jobs: collections.deque[tuple[Hashable | None, Job]] = collections.deque()
        self._pending_keys: set[Hashable] = set()
        self._wakeup: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the job task on the running loop (idempotent)."""
        if self.running:
            return
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task = self._loop.create_task(self._run(), name="coordination-watches")
        if self._jobs:
            self._wakeup.set()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._jobs.clear()
        self._pending_keys.clear()

    def submit(self, job: Job, key: Hashable | None = None) -> None:
        """Queue `job` from any thread. With a `key`, a job still queued under the same
        key absorbs this one (refreshes coalesce: one re-read serves a burst)."""
        loop = self._loop
        if loop is None or self._task is None:
            return
        if threading.get_ident() == self._thread:
            self._enqueue(key, job)
            return
        try:
            loop.call_soon_threadsafe(self._enqueue, key, job)
        except RuntimeError:  # the loop is closed: nobody is left to call back
            pass

    async def run(self, job: Job) -> None:
        """Queue `job` and wait until it has run, so a watch's first callback has been
        delivered when watch_*() returns. From inside a callback (the dispatcher's own
        task) it only queues: waiting there would wait for itself."""
        if asyncio.current_task() is self._task or not self.running:
            self.submit(job)
            return
        done = asyncio.Event()

        async def tracked() -> None:
            try:
                await invoke(job)
            finally:
                done.set()

        self.submit(tracked)
        task = self._task
        assert task is not None
        waiter = asyncio.ensure_future(done.wait())
        try:  # returns early if the dispatcher is closed meanwhile
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()

    async def wait_idle(self) -> None:
        """Return once every job queued so far has run (for orderly tests and shutdown).
        From inside a callback it returns at once (it would wait for itself)."""
        if asyncio.current_task() is self._task:
            return
        while self.running and (self._jobs or not self._idle_set()):
            assert self._idle is not None
            await self._idle.wait()
            await asyncio.sleep(0)

    def _idle_set(self) -> bool:
        return self._idle is None or self._idle.is_set()

    def _enqueue(self, key: Hashable | None, job: Job) -> None:
        if key is not None:
            if key in self._pending_keys:
                return
            self._pending_keys.add(key)
        self._jobs.append((key, job))
        if self._wakeup is not None:
            self._wakeup.set()
        if self._idle is not None:
            self._idle.clear()

    async def _run(self) -> None:
        assert self._wakeup is not None and self._idle is not None
        while True:
            while not self._jobs:
                self._idle.set()
                self._wakeup.clear()
                await self._wakeup.wait()
            self._idle.clear()
            key, job = self._jobs.popleft()
            if key is not None:
                self._pending_keys.discard(key)
            await invoke(job)


class StateBatches:
    """Partition-state changes delivered a topic at a time (watch_partition_states):
    a controller writes a topic's states together, and whoever watches them applies
    the topic once for the lot instead of once per partition.

    `add` collects a change and queues one flush job on the dispatcher (keyed: a
    flush still queued absorbs the changes that arrive before it runs), so the
    changes already queued behind the first one reach the callback in one call per
    topic: callback(topic, {partition: state or None}), the newest value of each.
    With `whole`, in one call for all of them: callback({topic: {partition: ...}}), so
    a broker applies a controller's batch over many topics (a controlled shutdown
    moves leaderships of every topic) in one pass (issue 25)."""

    def __init__(self, dispatcher: Dispatcher, callback: Callback,
                 cancelled: Callable[[], bool], whole: bool = False) -> None:
        self.dispatcher = dispatcher
        self.callback = callback
        self.cancelled = cancelled
        self.whole = whole
        self._pending: dict[str, dict[int, Any]] = {}

    def add(self, topic: str, partition: int, state: Any) -> None:
        self._pending.setdefault(topic, {})[partition] = state
        self.dispatcher.submit(self.flush, key=(id(self), "flush"))

    async def flush(self) -> None:
        """Deliver what was collected (also called directly at the end of a watch's
        first read, so watch_partition_states returns with the current states given)."""
        pending, self._pending = self._pending, {}
        if self.cancelled():
            return
        if self.whole:
            if pending:
                await invoke(self.callback, pending)
            return
        for topic, changes in pending.items():
            await invoke(self.callback, topic, changes)
