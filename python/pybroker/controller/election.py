"""Leader election rules (Kafka's PartitionLeaderElectionAlgorithms), pure
functions of a partition's assignment, ISR and the live brokers."""

from __future__ import annotations

from pybroker.coordination.znodes import LeaderAndIsr

NO_LEADER = -1


def initial_state(replicas: list[int], live: set[int], controller_epoch: int
                  ) -> LeaderAndIsr | None:
    """A new partition: the first live replica (in assignment order, so the
    preferred replica when it is up) leads; the live replicas form the ISR.
    None when no replica is alive (the partition waits for one)."""
    isr = [r for r in replicas if r in live]
    if not isr:
        return None
    return LeaderAndIsr(controller_epoch=controller_epoch, leader=isr[0], leader_epoch=0,
                        isr=isr)


def after_broker_change(replicas: list[int], current: LeaderAndIsr, live: set[int],
                        controller_epoch: int, unclean: bool) -> LeaderAndIsr | None:
    """The state a partition moves to when brokers die or come back; None when
    it stays as it is.

    A dead leader is replaced by the first live replica of the ISR (assignment
    order) and the leader epoch goes up; dead followers leave the ISR. With no
    live ISR member the partition goes offline (leader -1, ISR kept: only one of
    those replicas may lead again) unless unclean.leader.election.enable lets a
    live out-of-sync replica lead — which may lose acknowledged records. An
    offline partition gets its leader back when an ISR member returns."""
    live_isr = [r for r in current.isr if r in live]
    if current.leader != NO_LEADER and current.leader in live:
        if live_isr == current.isr:
            return None
        return _state(current, current.leader, current.leader_epoch, live_isr, controller_epoch)
    candidates = [r for r in replicas if r in live_isr]
    if candidates:
        leader = candidates[0]
        return _state(current, leader, current.leader_epoch + 1,
                      [r for r in live_isr], controller_epoch)
    if unclean:
        out_of_sync = [r for r in replicas if r in live]
        if out_of_sync:
            return _state(current, out_of_sync[0], current.leader_epoch + 1, [out_of_sync[0]],
                          controller_epoch)
    if current.leader == NO_LEADER:
        return None
    # offline: nobody may lead; the ISR keeps who may lead again
    return _state(current, NO_LEADER, current.leader_epoch + 1, current.isr, controller_epoch)


def _state(current: LeaderAndIsr, leader: int, leader_epoch: int, isr: list[int],
           controller_epoch: int) -> LeaderAndIsr:
    return LeaderAndIsr(controller_epoch=controller_epoch, leader=leader,
                        leader_epoch=leader_epoch, isr=isr,
                        leader_recovery_state=current.leader_recovery_state)


def preferred(replicas: list[int], current: LeaderAndIsr, live: set[int],
              controller_epoch: int) -> LeaderAndIsr | None:
    """Preferred-replica election (Kafka's PreferredReplicaPartitionLeaderElection):
    the first replica leads when it is alive and in the ISR; None when it cannot.
    The caller has checked it does not lead already."""
    first = replicas[0] if replicas else NO_LEADER
    if first not in live or first not in current.isr:
        return None
    return _state(current, first, current.leader_epoch + 1, list(current.isr), controller_epoch)


def unclean(replicas: list[int], current: LeaderAndIsr, live: set[int],
            controller_epoch: int) -> LeaderAndIsr | None:
    """An offline partition's unclean election (ElectLeaders UNCLEAN): a live ISR
    member if one came back, else the first live replica, alone in the ISR (it may
    lack acknowledged records). None when no replica is alive."""
    in_sync = [r for r in replicas if r in live and r in current.isr]
    if in_sync:
        return _state(current, in_sync[0], current.leader_epoch + 1,
                      [r for r in current.isr if r in live], controller_epoch)
    alive = [r for r in replicas if r in live]
    if not alive:
        return None
    return _state(current, alive[0], current.leader_epoch + 1, [alive[0]], controller_epoch)


def without_broker(replicas: list[int], current: LeaderAndIsr, broker: int, live: set[int],
                   excluded: set[int], controller_epoch: int) -> LeaderAndIsr | None:
    """Controlled shutdown of `broker` (Kafka's ControlledShutdownLeaderElection): a
    partition it leads gets the first live ISR member not shutting down as leader
    (epoch + 1); one it follows loses it from the ISR. None when nothing changes or
    nobody else can lead (the partition stays: it is reported as remaining)."""
    isr = [r for r in current.isr if r != broker]
    if current.leader == broker:
        candidates = [r for r in replicas if r in isr and r in live and r not in excluded]
        if not candidates:
            return None
        return _state(current, candidates[0], current.leader_epoch + 1, isr, controller_epoch)
    if broker not in current.isr or not isr:
        return None
    return _state(current, current.leader, current.leader_epoch, isr, controller_epoch)


def conform(replicas: list[int], current: LeaderAndIsr, live: set[int],
            controller_epoch: int) -> LeaderAndIsr | None:
    """A state naming brokers no longer assigned (a reassignment completed, or was
    cut short by a controller change) drops them: the ISR keeps assigned replicas
    only, and a leader that is not assigned any more is replaced. None when the
    state only names assigned replicas."""
    if current.leader in (NO_LEADER, *replicas) and all(r in replicas for r in current.isr):
        return None
    isr = [r for r in current.isr if r in replicas]
    if current.leader in replicas:
        return _state(current, current.leader, current.leader_epoch, isr, controller_epoch)
    candidates = [r for r in replicas if r in isr and r in live]
    leader = candidates[0] if candidates else NO_LEADER
    return _state(current, leader, current.leader_epoch + 1, isr or current.isr,
                  controller_epoch)
