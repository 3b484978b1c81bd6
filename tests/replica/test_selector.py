"""KIP-392's RackAwareReplicaSelector as the leader applies it to a consumer fetch."""

from __future__ import annotations

from types import SimpleNamespace

from pybroker.config import RACK_AWARE_SELECTOR
from pybroker.replica.partition import FollowerState
from pybroker.replica.selector import preferred_read_replica

RACKS = {1: "a", 2: "b", 3: "b", 4: "c"}


def leader(followers: dict[int, FollowerState], hw: int = 10) -> SimpleNamespace:
    return SimpleNamespace(is_leader=True, broker_id=1, high_watermark=hw, followers=followers)


def test_consumer_is_sent_to_the_most_caught_up_replica_on_its_rack() -> None:
    p = leader({2: FollowerState(log_end_offset=10), 3: FollowerState(log_end_offset=12),
                4: FollowerState(log_end_offset=12)})
    assert preferred_read_replica(RACK_AWARE_SELECTOR, p, "b", RACKS, 0) == 3  # type: ignore[arg-type]


def test_leader_stays_when_no_selector_no_rack_or_same_rack() -> None:
    p = leader({2: FollowerState(log_end_offset=10)})
    assert preferred_read_replica(None, p, "b", RACKS, 0) == -1  # type: ignore[arg-type]
    assert preferred_read_replica(RACK_AWARE_SELECTOR, p, "", RACKS, 0) == -1  # type: ignore[arg-type]
    assert preferred_read_replica(RACK_AWARE_SELECTOR, p, "a", RACKS, 0) == -1  # type: ignore[arg-type]
    assert preferred_read_replica(RACK_AWARE_SELECTOR, p, "z", RACKS, 0) == -1  # type: ignore[arg-type]


def test_a_lagging_or_dead_follower_is_no_candidate() -> None:
    p = leader({2: FollowerState(log_end_offset=9), 3: FollowerState(log_end_offset=10)})
    assert preferred_read_replica(RACK_AWARE_SELECTOR, p, "b", {1: "a", 2: "b"}, 0) == -1  # type: ignore[arg-type]
    assert preferred_read_replica(RACK_AWARE_SELECTOR, p, "b", RACKS, 0) == 3  # type: ignore[arg-type]
