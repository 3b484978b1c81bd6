"""A classic group's state: members, generation, selected protocol, offsets.

States and moves (Kafka's GroupMetadata):

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable / CompletingRebalance --join, leave, expiry--> PreparingRebalance
    PreparingRebalance --nobody left--> Empty;  Empty --deleted / expired--> Dead
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from typing import TYPE_CHECKING

from pybroker.group.member import Member

if TYPE_CHECKING:
    from pybroker.group.consumer.state import ConsumerGroup

#: in GroupCoordinator.unreadable: a record whose key could not be read (it may be
#: any group's)
ANY_GROUP = "\x00any"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclasses.dataclass
class OffsetEntry:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclasses.dataclass
class InitialDelay:
    """Kafka's InitialDelayedJoin: a new group waits for more members to arrive."""

    deadline_ms: float
    delay_ms: int
    remaining_ms: int
    new_member_added: bool = False


class Group:
    def __init__(self, group_id: str, now_wall_ms: int = -1) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        #: member ids handed out with MEMBER_ID_REQUIRED -> monotonic deadline
        self.pending: dict[str, float] = {}
        #: group.instance.id -> member id
        self.static: dict[str, str] = {}
        self.offsets: dict[tuple[str, int], OffsetEntry] = {}
        self.rebalance_deadline_ms = 0.0
        self.sync_deadline_ms = 0.0
        self.initial_delay: InitialDelay | None = None
        self.state_timestamp_ms = now_wall_ms
        #: set when this is a KIP-848 consumer group (group/consumer/); offsets stay here
        self.consumer: ConsumerGroup | None = None

    def __repr__(self) -> str:
        return (f"Group({self.group_id!r}, {self.state.value}, gen={self.generation}, "
                f"members={list(self.members)})")

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        iid = member.group_instance_id
        if iid is not None and self.static.get(iid) == member_id:
            del self.static[iid]
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member

    def replace_static(self, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if member.group_instance_id is not None:
            self.static[member.group_instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id
        return member

    def all_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self, extra: list[str] | None = None) -> set[str]:
        """Protocols every member (and `extra`, a joining member's list) supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        if extra is not None:
            sets.append(set(extra))
        if not sets:
            return set()
        return set.intersection(*sets)

    def supports(self, protocol_type: str, protocols: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols(protocols))

    def select_protocol(self) -> str | None:
        """The protocol all members support that most members prefer (Kafka's vote)."""
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes: Counter[str] = Counter()
        first: list[str] = []
        for member in self.members.values():
            choice = next(p for p in member.protocol_names() if p in candidates)
            votes[choice] += 1
            if choice not in first:
                first.append(choice)
        return max(first, key=lambda p: votes[p])
