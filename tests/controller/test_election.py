"""The controller's leader election rules and replica assignment."""

from __future__ import annotations

import pytest

from pybroker.controller.assignment import assign_replicas
from pybroker.controller.election import after_broker_change, initial_state
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.errors import ErrorCode, KafkaError


def state(leader: int, epoch: int, isr: list[int]) -> LeaderAndIsr:
    return LeaderAndIsr(controller_epoch=1, leader=leader, leader_epoch=epoch, isr=isr)


def test_assignment_spreads_leaders_and_replicas_as_the_seeds_describe() -> None:
    assert assign_replicas(4, 3, [3, 1, 2]) == [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3]]
    # new partitions continue the rotation where the topic left off
    assert assign_replicas(2, 2, [1, 2, 3], first_partition=4) == [[2, 3], [3, 1]]


def test_assignment_refuses_more_replicas_than_brokers() -> None:
    with pytest.raises(KafkaError) as err:
        assign_replicas(1, 3, [1, 2])
    assert err.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_new_partition_is_led_by_the_first_live_replica() -> None:
    assert initial_state([1, 2, 3], {1, 2, 3}, 5) == LeaderAndIsr(
        controller_epoch=5, leader=1, leader_epoch=0, isr=[1, 2, 3])
    assert initial_state([1, 2, 3], {2, 3}, 5).leader == 2
    assert initial_state([1, 2, 3], set(), 5) is None


def test_dead_leader_is_replaced_from_the_live_isr_with_a_new_epoch() -> None:
    new = after_broker_change([1, 2, 3], state(1, 4, [1, 2, 3]), {2, 3}, 2, unclean=False)
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr) == (2, 5, [2, 3])


def test_out_of_sync_replica_never_leads_without_unclean_election() -> None:
    # 3 is alive but not in the ISR: the partition goes offline, the ISR remembers who may lead
    offline = after_broker_change([1, 2, 3], state(1, 4, [1]), {3}, 2, unclean=False)
    assert offline is not None
    assert (offline.leader, offline.isr) == (-1, [1])
    assert after_broker_change([1, 2, 3], offline, {3}, 2, unclean=False) is None
    # the ISR member comes back: it leads again
    back = after_broker_change([1, 2, 3], offline, {1, 3}, 2, unclean=False)
    assert back is not None and back.leader == 1
    # with unclean.leader.election.enable the live out-of-sync replica may lead
    unclean = after_broker_change([1, 2, 3], state(1, 4, [1]), {3}, 2, unclean=True)
    assert unclean is not None and (unclean.leader, unclean.isr) == (3, [3])


def test_dead_follower_leaves_the_isr_and_a_live_leader_keeps_its_epoch() -> None:
    new = after_broker_change([1, 2, 3], state(1, 4, [1, 2, 3]), {1, 2}, 2, unclean=False)
    assert new is not None and (new.leader, new.leader_epoch, new.isr) == (1, 4, [1, 2])
    assert after_broker_change([1, 2, 3], state(1, 4, [1, 2]), {1, 2, 3}, 2,
                               unclean=False) is None
