"""A KIP-848 consumer group: group epoch, target assignment, members with their
own epochs and the partitions they own.

Group states (Kafka's ConsumerGroupState): Empty (no members), Assigning (the
group epoch is ahead of the target assignment's), Reconciling (a member has not
reached the target yet), Stable. Member states (Kafka's MemberState, persisted
as int8): STABLE, UNREVOKED_PARTITIONS (it must first give up partitions),
UNRELEASED_PARTITIONS (it waits for partitions another member still owns).
"""

from __future__ import annotations

import dataclasses
import enum
import uuid

from pybroker.group.consumer.records import Assignment, ResolvedRegex

#: a static member that left with epoch -2: its assignment is kept for its return
LEAVE_STATIC_EPOCH = -2
LEAVE_EPOCH = -1


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclasses.dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = dataclasses.field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = dataclasses.field(default_factory=dict)
    pending_revocation: Assignment = dataclasses.field(default_factory=dict)
    #: monotonic ms: the session ends (no heartbeat) / the revocation is overdue
    session_deadline_ms: float = 0.0
    revocation_deadline_ms: float | None = None


def owned_pairs(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, parts in assignment.items() for p in parts}


def from_pairs(pairs: set[tuple[uuid.UUID, int]]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in pairs:
        out.setdefault(topic_id, set()).add(partition)
    return {t: frozenset(p) for t, p in out.items()}


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        #: member id -> its target assignment
        self.target: dict[str, Assignment] = {}
        #: the subscribed topics as of the group epoch: name -> (topic id, partitions)
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        #: the assignor of the current target assignment
        self.assignor = ""
        #: subscribed regex -> the topics it matched when last resolved (resolved off the
        #: heartbeat; a regex not in here yet contributes no topics)
        self.resolved_regexes: dict[str, ResolvedRegex] = {}

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id!r}, {self.state}, epoch={self.group_epoch}, "
                f"members={list(self.members)})")

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def regex_subscribers(self, regex: str, exclude: str | None = None) -> int:
        """How many members (other than `exclude`) subscribe with `regex`."""
        return sum(1 for m in self.members.values()
                   if m.subscribed_topic_regex == regex and m.member_id != exclude)

    def subscribed_regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values()
                if m.subscribed_topic_regex}

    def last_regex_refresh_ms(self) -> int | None:
        """When the regexes were last resolved (they are resolved together)."""
        return max((r.timestamp_ms for r in self.resolved_regexes.values()), default=None)

    def owners(self, exclude: str) -> set[tuple[uuid.UUID, int]]:
        """Partitions other members still hold (assigned or not yet revoked)."""
        held: set[tuple[uuid.UUID, int]] = set()
        for m in self.members.values():
            if m.member_id != exclude:
                held |= owned_pairs(m.assigned) | owned_pairs(m.pending_revocation)
        return held
