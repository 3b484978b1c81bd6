"""Replication throttles: which replicas, and the rate over the window."""

from __future__ import annotations

from pybroker.replica.throttle import WINDOWS, ReplicationQuota, throttled


def test_throttled_replicas_lists_and_wildcard() -> None:
    assert throttled(["0:4", "1:4"], 1, 4)
    assert not throttled(["0:4"], 0, 3)
    assert throttled("*", 7, 1)
    assert throttled("0:1,0:2", 0, 2)
    assert not throttled([], 0, 1) and not throttled("", 0, 1)


def test_rate_is_bounded_over_the_window() -> None:
    now = [100.0]
    quota = ReplicationQuota(lambda: 1000, clock=lambda: now[0])
    assert not quota.exceeded()
    quota.record(5000)
    assert quota.exceeded()  # 5000 B within a second
    now[0] += 4.0
    assert quota.rate() == 5000 / 4.0 and quota.exceeded()
    now[0] += 2.0
    assert quota.rate() < 1000 and not quota.exceeded()
    now[0] += WINDOWS + 1
    assert quota.rate() == 0.0


def test_nothing_throttled_looks_up_no_limit() -> None:
    """A fetch round asks whether the quota is exceeded; with nothing throttled in the
    windows the dynamic config is not read (issue 26), and once bytes are, it is."""
    looked_up = 0

    def limit() -> int:
        nonlocal looked_up
        looked_up += 1
        return 1000

    now = [100.0]
    quota = ReplicationQuota(limit, clock=lambda: now[0])
    assert not any(quota.exceeded() for _ in range(100))
    assert looked_up == 0
    quota.record(5000)
    assert quota.exceeded() and looked_up == 1
    now[0] += WINDOWS + 1  # the bytes age out of every window
    assert not quota.exceeded() and looked_up == 1
