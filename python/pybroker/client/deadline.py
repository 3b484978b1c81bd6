"""The time limit of a connection's requests, with one loop timer per connection rather
than one per request (issue 26).

A replica fetcher makes a request per fetch round trip, a thousand or more a second, and
almost none of them comes near its limit (replica.fetch.wait.max.ms plus
replica.socket.timeout.ms, about 30 s). asyncio.timeout arms a loop timer per request and
cancels it at the end: under uvloop a libuv timer made, started, stopped and closed each
time, about 15 % of a follower's fetch-loop Python (py-spy --gil, RF 3 acks=all). Here a
request only records when it must end; the one timer, armed when none is, looks when it
fires: no request out, it is dropped; the request out has a later end, it is armed again
for that; past its end, the request's task is cancelled and the cancellation ends as a
TimeoutError, as asyncio.timeout's does (the same uncancel rule: a cancellation from
elsewhere at the same time stays a cancellation)."""

from __future__ import annotations

import asyncio


class RequestDeadline:
    """At most one request at a time (a BrokerConnection's), each with its own limit."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        #: loop time the timer is armed for
        self._timer_at = 0.0
        #: the request out: its task, its end (loop time), the task's cancellations before it
        self._task: asyncio.Task[object] | None = None
        self._when = 0.0
        self._cancelling = 0
        #: the timer cancelled the request out
        self._expired = False

    def start(self, seconds: float) -> None:
        """A request begins in the current task; it must end within `seconds`."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)  # the loop given: no second lookup of it
        assert task is not None, "a request runs in a task"
        self._task = task
        self._cancelling = task.cancelling()
        self._expired = False
        self._when = when = loop.time() + seconds
        timer = self._timer
        if timer is None or when < self._timer_at:
            # none armed, or armed for later than this request may run (a shorter limit)
            if timer is not None:
                timer.cancel()
            self._arm(loop, when)

    def stop(self, cancelled: bool) -> bool:
        """The request is over; `cancelled` if it ended in a CancelledError. True when
        that cancellation was this deadline's alone: the caller raises TimeoutError."""
        task, self._task = self._task, None
        if not self._expired:
            return False
        self._expired = False
        assert task is not None
        # the timer's cancel taken back; more left means someone else cancelled too
        return task.uncancel() <= self._cancelling and cancelled

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        self._timer_at = when
        self._timer = loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        task = self._task
        if task is None:
            return  # no request out: the next one arms it again
        assert self._loop is not None
        if self._loop.time() < self._when:
            self._arm(self._loop, self._when)  # a later request than the one it was armed for
            return
        self._expired = True
        task.cancel()
