"""Partition reassignment (KIP-455, Kafka's ZooKeeper-era algorithm), as pure
functions of a topic's assignment and a partition's state.

While partition p moves from its original replicas ORS to the target TRS, its
assignment (/brokers/topics/<t>) lists RS = TRS + (ORS - TRS), with
adding_replicas = TRS - ORS and removing_replicas = ORS - TRS. Every broker in
RS holds a replica, so the new ones start fetching from the leader and join the
ISR once caught up. When all of TRS is in the ISR the controller completes the
move: leadership goes to a target replica if the leader is leaving, the removed
replicas leave the ISR and the assignment becomes TRS (brokers no longer in it
stop fetching and delete the partition's data). Cancelling makes the original
replicas the target again, which completes at once when they are in the ISR."""

from __future__ import annotations

from pybroker.coordination.base import TopicAssignment
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.errors import ErrorCode, KafkaError


def is_reassigning(assignment: TopicAssignment, index: int) -> bool:
    return bool(assignment.adding_replicas.get(index) or assignment.removing_replicas.get(index))


def original_replicas(assignment: TopicAssignment, index: int) -> list[int]:
    adding = assignment.adding_replicas.get(index, [])
    return [r for r in assignment.partitions[index] if r not in adding]


def target_replicas(assignment: TopicAssignment, index: int) -> list[int]:
    removing = assignment.removing_replicas.get(index, [])
    return [r for r in assignment.partitions[index] if r not in removing]


def with_partition(assignment: TopicAssignment, index: int, replicas: list[int],
                   adding: list[int], removing: list[int]) -> TopicAssignment:
    """The assignment with partition `index` set (its adding/removing entries dropped
    when empty)."""
    partitions = dict(assignment.partitions)
    partitions[index] = list(replicas)
    adds = {p: r for p, r in assignment.adding_replicas.items() if p != index}
    removes = {p: r for p, r in assignment.removing_replicas.items() if p != index}
    if adding:
        adds[index] = list(adding)
    if removing:
        removes[index] = list(removing)
    return TopicAssignment(name=assignment.name, topic_id=assignment.topic_id,
                           partitions=partitions, adding_replicas=adds,
                           removing_replicas=removes)


def start(assignment: TopicAssignment, index: int, target: list[int],
          live: set[int]) -> TopicAssignment:
    """The assignment once a move of partition `index` to `target` starts (Kafka's
    ReplicaAssignment.fromTarget over the original replicas: a new target
    replaces an ongoing one). INVALID_REPLICA_ASSIGNMENT for a bad target."""
    if not target or len(set(target)) != len(target) or any(r < 0 for r in target):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Invalid replica assignment {target} for partition {index}")
    dead = [r for r in target if r not in live]
    if dead:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Replica assignment has brokers that are not alive. Replica list: "
                         f"{target}, live broker list: {sorted(live)}")
    original = original_replicas(assignment, index)
    removing = [r for r in original if r not in target]
    adding = [r for r in target if r not in original]
    return with_partition(assignment, index, target + removing, adding, removing)


def cancel(assignment: TopicAssignment, index: int) -> TopicAssignment:
    """Revert: the original replicas become the target again; the added ones go.
    NO_REASSIGNMENT_IN_PROGRESS when the partition is not moving."""
    if not is_reassigning(assignment, index):
        raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                         f"No reassignment in progress for partition {assignment.name}-{index}")
    original = original_replicas(assignment, index)
    added = [r for r in assignment.partitions[index] if r not in original]
    return with_partition(assignment, index, original + added, [], added)


def completion(assignment: TopicAssignment, index: int, state: LeaderAndIsr,
               live: set[int], excluded: set[int], controller_epoch: int
               ) -> LeaderAndIsr | None:
    """The state that completes partition `index`'s move, once every target replica
    is in the ISR and one of them can lead; None while it must wait. The leader
    stays when it is a live target replica (same epoch: only the ISR shrinks);
    otherwise the first live target replica in the ISR leads at epoch + 1."""
    target = target_replicas(assignment, index)
    if not all(r in state.isr for r in target):
        return None
    isr = [r for r in state.isr if r in target]
    if state.leader in target and state.leader in live and state.leader not in excluded:
        return LeaderAndIsr(controller_epoch=controller_epoch, leader=state.leader,
                            leader_epoch=state.leader_epoch, isr=isr,
                            leader_recovery_state=state.leader_recovery_state)
    candidates = [r for r in target if r in isr and r in live and r not in excluded]
    if not candidates:
        return None
    return LeaderAndIsr(controller_epoch=controller_epoch, leader=candidates[0],
                        leader_epoch=state.leader_epoch + 1, isr=isr,
                        leader_recovery_state=state.leader_recovery_state)
