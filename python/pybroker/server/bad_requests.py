"""Logging of refused requests (malformed, unknown API, oversized frame), at a
bounded rate: a client that sends garbage on purpose must not be able to fill
the broker's log (a fuzzer's million inputs wrote 83 MB). At most
BURST_MAX lines per WINDOW_S; the rest are counted and summed up in one line
when the next window opens."""

from __future__ import annotations

import logging
import time

#: lines logged per window before the rest are only counted
BURST_MAX = 20
WINDOW_S = 10.0


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, burst_max: int = BURST_MAX,
                 window_s: float = WINDOW_S) -> None:
        self.logger = logger
        self.burst_max = burst_max
        self.window_s = window_s
        self._window_start = time.monotonic()
        self._logged = 0
        self._suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._window_start >= self.window_s:
            if self._suppressed:
                self.logger.warning("%d more refused requests in the last %.0f s were not "
                                    "logged", self._suppressed, now - self._window_start)
            self._window_start, self._logged, self._suppressed = now, 0, 0
        if self._logged < self.burst_max:
            self._logged += 1
            self.logger.warning(message, *args)
        else:
            self._suppressed += 1
