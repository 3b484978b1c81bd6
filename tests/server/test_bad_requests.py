"""Refused requests are logged at a bounded rate."""

from __future__ import annotations

import logging

import pytest

from pybroker.server.bad_requests import RateLimitedLog


def test_a_flood_of_refused_requests_logs_a_bounded_number_of_lines(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("pybroker.server.bad_requests.time.monotonic", lambda: now[0])
    limited = RateLimitedLog(logging.getLogger("test.refused"), burst_max=3, window_s=10)
    with caplog.at_level(logging.WARNING, logger="test.refused"):
        for i in range(1000):
            limited.warning("closing peer %d: malformed request", i)
        assert len(caplog.records) == 3
        now[0] += 10
        limited.warning("closing peer again")
    messages = [r.getMessage() for r in caplog.records]
    assert messages[3] == "997 more refused requests in the last 10 s were not logged"
    assert messages[4] == "closing peer again"
