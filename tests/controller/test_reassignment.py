"""Reassignment, preferred/unclean election and controlled-shutdown rules (pure)."""

from __future__ import annotations

import uuid

import pytest

from pybroker.controller import election, reassignment
from pybroker.coordination.base import TopicAssignment
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.errors import ErrorCode, KafkaError

LIVE = {1, 2, 3, 4}


def state(leader: int, epoch: int, isr: list[int]) -> LeaderAndIsr:
    return LeaderAndIsr(controller_epoch=1, leader=leader, leader_epoch=epoch, isr=isr)


def topic(replicas: list[int]) -> TopicAssignment:
    return TopicAssignment(name="t", topic_id=uuid.UUID(int=1), partitions={0: replicas})


def test_a_move_lists_target_then_leaving_replicas_with_adding_and_removing() -> None:
    moving = reassignment.start(topic([1, 2, 3]), 0, [2, 3, 4], LIVE)
    assert moving.partitions[0] == [2, 3, 4, 1]
    assert moving.adding_replicas == {0: [4]} and moving.removing_replicas == {0: [1]}
    assert reassignment.is_reassigning(moving, 0)
    assert reassignment.target_replicas(moving, 0) == [2, 3, 4]
    assert reassignment.original_replicas(moving, 0) == [2, 3, 1]
    # a new target replaces the ongoing one, measured from the original replicas
    again = reassignment.start(moving, 0, [1, 2, 3], LIVE)
    assert again.partitions[0] == [1, 2, 3] and not reassignment.is_reassigning(again, 0)


def test_a_move_to_dead_or_duplicate_brokers_is_refused() -> None:
    for target in ([1, 1, 2], [], [1, 2, 9]):
        with pytest.raises(KafkaError) as err:
            reassignment.start(topic([1, 2, 3]), 0, target, LIVE)
        assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_cancel_makes_the_original_replicas_the_target_again() -> None:
    moving = reassignment.start(topic([1, 2, 3]), 0, [2, 3, 4], LIVE)
    cancelled = reassignment.cancel(moving, 0)
    assert cancelled.adding_replicas == {} and cancelled.removing_replicas == {0: [4]}
    assert sorted(reassignment.target_replicas(cancelled, 0)) == [1, 2, 3]
    with pytest.raises(KafkaError) as err:
        reassignment.cancel(topic([1, 2, 3]), 0)
    assert err.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_completion_waits_for_the_isr_then_moves_leadership_off_leaving_replicas() -> None:
    moving = reassignment.start(topic([1, 2, 3]), 0, [2, 3, 4], LIVE)
    assert reassignment.completion(moving, 0, state(1, 5, [1, 2, 3]), LIVE, set(), 2) is None
    done = reassignment.completion(moving, 0, state(1, 5, [1, 2, 3, 4]), LIVE, set(), 2)
    assert done is not None and (done.leader, done.leader_epoch, done.isr) == (2, 6, [2, 3, 4])
    # a leader that stays keeps its epoch; only the ISR shrinks
    kept = reassignment.completion(moving, 0, state(3, 5, [1, 2, 3, 4]), LIVE, set(), 2)
    assert kept is not None and (kept.leader, kept.leader_epoch, kept.isr) == (3, 5, [2, 3, 4])


def test_preferred_and_unclean_elections() -> None:
    assert election.preferred([1, 2, 3], state(2, 4, [1, 2, 3]), LIVE, 2).leader == 1
    assert election.preferred([1, 2, 3], state(2, 4, [2, 3]), LIVE, 2) is None
    assert election.preferred([1, 2, 3], state(2, 4, [1, 2, 3]), {2, 3}, 2) is None
    unclean = election.unclean([1, 2, 3], state(-1, 4, [1]), {3}, 2)
    assert unclean is not None and (unclean.leader, unclean.isr, unclean.leader_epoch) == (
        3, [3], 5)
    assert election.unclean([1, 2, 3], state(-1, 4, [1]), {4}, 2) is None


def test_controlled_shutdown_moves_leadership_and_leaves_the_isr() -> None:
    moved = election.without_broker([1, 2, 3], state(1, 4, [1, 2, 3]), 1, LIVE, {1}, 2)
    assert moved is not None and (moved.leader, moved.leader_epoch, moved.isr) == (2, 5, [2, 3])
    # a broker also shutting down gets nothing
    moved = election.without_broker([1, 2, 3], state(1, 4, [1, 2, 3]), 1, LIVE, {1, 2}, 2)
    assert moved is not None and moved.leader == 3
    # a follower only leaves the ISR; the last ISR member stays
    follower = election.without_broker([1, 2, 3], state(2, 4, [1, 2, 3]), 1, LIVE, {1}, 2)
    assert follower is not None and (follower.leader, follower.isr) == (2, [2, 3])
    assert election.without_broker([1, 2], state(1, 4, [1]), 1, LIVE, {1}, 2) is None


def test_a_state_naming_unassigned_brokers_conforms_to_the_assignment() -> None:
    assert election.conform([2, 3, 4], state(2, 4, [2, 3, 4]), LIVE, 2) is None
    trimmed = election.conform([2, 3, 4], state(2, 4, [1, 2, 3, 4]), LIVE, 2)
    assert trimmed is not None and (trimmed.leader, trimmed.isr) == (2, [2, 3, 4])
    moved = election.conform([2, 3, 4], state(1, 4, [1, 3, 4]), LIVE, 2)
    assert moved is not None and (moved.leader, moved.leader_epoch, moved.isr) == (3, 5, [3, 4])
