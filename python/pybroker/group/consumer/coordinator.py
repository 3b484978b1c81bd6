"""The KIP-848 consumer group coordinator: ConsumerGroupHeartbeat's state machine.

A heartbeat (1) validates the request, (2) creates or finds the member (static
members by group.instance.id), checking its epoch, (3) bumps the group epoch when
a subscription or the subscribed topics' metadata changed, (4) computes a new
target assignment with the server-side assignor when the group epoch is ahead of
it, and (5) moves the member one step towards its target: first it revokes what
it must give up (its epoch stays), then, once it acknowledged that by leaving
those partitions out of its owned list, it reaches the target epoch and gets the
new partitions that no other member still holds. A partition thus goes to a new
owner only after its old owner has let it go. Every change is appended to
`__consumer_offsets` (records.py) before the heartbeat is answered.

Groups share the classic coordinator's table (`Group.consumer` holds this state,
`Group.offsets` the committed offsets), so group ids, offsets and admin requests
have one home. A subscribed regex is resolved as Kafka 4 does, off the heartbeat
(regexes.py): the heartbeat that brings a new regex assigns the literal topic names
at once and schedules the resolution; its result is kept as group state (a
ConsumerGroupRegularExpression record per regex), bumps the group epoch when the
matched topics changed, and a later heartbeat gets the new target. A group's
regexes are resolved again, at most once per MIN_REFRESH_INTERVAL_MS, when one is
unresolved, topics were created since, or group.consumer.regex.refresh.interval.ms
passed.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.group.consumer import records as crec
from pybroker.group.consumer import regexes, replay
from pybroker.group.consumer.assignors import ASSIGNORS
from pybroker.group.consumer.describe import described_group, not_described
from pybroker.group.consumer.state import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    from_pairs,
    owned_pairs,
)
from pybroker.group.consumer.topics import StaticTopics, TopicView
from pybroker.group.offsets import Record
from pybroker.group.state import ANY_GROUP, Group

if TYPE_CHECKING:
    from pybroker.config import BrokerConfig
    from pybroker.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

Body = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ConsumerGroupConfig:
    assignors: tuple[str, ...] = ("uniform", "range")
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2147483647
    #: group.consumer.regex.refresh.interval.ms: a group's regexes are resolved again
    #: at least this often even when no topic was created
    regex_refresh_interval_ms: int = 600000

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> ConsumerGroupConfig:
        assignors = tuple(a.strip() for a in config["group.consumer.assignors"] if a.strip())
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if unknown or not assignors:
            raise ValueError(f"group.consumer.assignors: unknown assignor(s) {unknown}; "
                             f"known: {sorted(ASSIGNORS)}")
        session = config["group.consumer.session.timeout.ms"]
        interval = config["group.consumer.heartbeat.interval.ms"]
        # Kafka refuses values outside the min/max keys; clamp rather than not start
        session = min(max(session, config["group.consumer.min.session.timeout.ms"]),
                      config["group.consumer.max.session.timeout.ms"])
        interval = min(max(interval, config["group.consumer.min.heartbeat.interval.ms"]),
                       config["group.consumer.max.heartbeat.interval.ms"])
        return cls(assignors, session, interval, config["group.consumer.max.size"],
                   config["group.consumer.regex.refresh.interval.ms"])


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def heartbeat_error(code: ErrorCode, message: str | None = None) -> Body:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0,
            "assignment": None}


class ConsumerGroupCoordinator:
    def __init__(self, parent: GroupCoordinator, config: ConsumerGroupConfig | None = None,
                 topics: TopicView | None = None) -> None:
        self.parent = parent
        self.config = config or ConsumerGroupConfig()
        self.topics: TopicView = topics or StaticTopics({})
        #: a group's value of a group config (admin/group_configs.py: its override, else
        #: the broker's default); None: the broker defaults in self.config only
        self.group_config: Callable[[str, str], Any] | None = None
        #: where regex resolutions run (off the heartbeat)
        self.executor: regexes.LoopExecutor | regexes.ManualExecutor = regexes.LoopExecutor()
        #: the topic view's creation count last seen, and the version (wall-clock ms,
        #: strictly increasing) given to the topics since: a resolution older than it
        #: may miss a topic (None: nothing seen yet, so every loaded resolution is old,
        #: as a new Kafka coordinator treats its first metadata image as all new)
        self._created_seen: int | None = None
        self._topics_version = 0

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's consumer.session.timeout.ms (KIP-848 group config)."""
        if self.group_config is None:
            return self.config.session_timeout_ms
        return int(self.group_config(group_id, "consumer.session.timeout.ms"))

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's consumer.heartbeat.interval.ms (KIP-848 group config)."""
        if self.group_config is None:
            return self.config.heartbeat_interval_ms
        return int(self.group_config(group_id, "consumer.heartbeat.interval.ms"))

    # --- lookups ---------------------------------------------------------------------
    def group(self, group_id: str) -> ConsumerGroup | None:
        group = self.parent.groups.get(group_id)
        return group.consumer if group is not None else None

    # --- ConsumerGroupHeartbeat ----------------------------------------------------------
    def heartbeat(self, body: Body, version: int, client_id: str, client_host: str,
                  describable: Callable[[str], bool] | None = None) -> Body:
        """`describable`: may the member's principal DESCRIBE a topic (None: no
        authorizer); a regex this heartbeat has resolved matches only those (Kafka's
        filterTopicDescribeAuthorizedTopics)."""
        try:
            return self._heartbeat(body, version, client_id, client_host, describable)
        except HeartbeatError as exc:
            return heartbeat_error(exc.code, exc.message)

    def _validate(self, body: Body, version: int) -> None:
        group_id, member_id = body["group_id"], body["member_id"] or ""
        epoch = body["member_epoch"]
        bad = ErrorCode.INVALID_REQUEST
        if not group_id:
            raise HeartbeatError(bad, "GroupId can't be empty.")
        if body["rack_id"] is not None and not body["rack_id"]:
            raise HeartbeatError(bad, "RackId can't be empty.")
        if epoch == 0:
            if version >= 1 and not member_id:
                raise HeartbeatError(bad, "MemberId can't be empty.")
            if body["rebalance_timeout_ms"] == -1:
                raise HeartbeatError(bad, "RebalanceTimeoutMs must be provided in first "
                                          "request.")
            if body["topic_partitions"] is None or body["topic_partitions"]:
                raise HeartbeatError(bad, "TopicPartitions must be empty when (re-)joining.")
            if body["subscribed_topic_names"] is None and body.get("subscribed_topic_regex") \
                    is None:
                raise HeartbeatError(bad, "SubscribedTopicNames or SubscribedTopicRegex must "
                                          "be set in first request.")
        elif epoch == LEAVE_STATIC_EPOCH:
            if not member_id:
                raise HeartbeatError(bad, "MemberId can't be empty.")
            if body["instance_id"] is None:
                raise HeartbeatError(bad, "InstanceId can't be null.")
        elif epoch >= LEAVE_EPOCH:
            if not member_id:
                raise HeartbeatError(bad, "MemberId can't be empty.")
        else:
            raise HeartbeatError(bad, f"MemberEpoch is {epoch}, but must be greater than or "
                                      "equal to -2.")
        assignor = body["server_assignor"]
        if assignor is not None and assignor not in self.config.assignors:
            raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {assignor} is not supported. Supported "
                                 f"assignors: {', '.join(self.config.assignors)}.")
        regex = body.get("subscribed_topic_regex")
        if regex and (reason := regexes.invalid_reason(regex)) is not None:
            raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex `{regex}` is not a valid regular "
                                 f"expression: {reason}.")

    def _heartbeat(self, body: Body, version: int, client_id: str, client_host: str,
                   describable: Callable[[str], bool] | None) -> Body:
        self._validate(body, version)
        group_id = body["group_id"]
        if (code := self.parent.coordinator_error(group_id)) is not None:
            raise HeartbeatError(code, code.name)
        member_id = body["member_id"] or ""
        epoch = body["member_epoch"]
        records: list[Record] = []
        if epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(group_id, member_id, epoch, body["instance_id"])
        group = self._group_for_heartbeat(group_id, create=epoch == 0, records=records)
        now = self.parent.clock()
        member, is_new = self._member_for_heartbeat(group, body, version, records)
        old = dataclasses.replace(member)
        member.session_deadline_ms = now + self.session_timeout_ms(group_id)
        if is_new:
            member.client_id, member.client_host = client_id, client_host
        changed = self._update_member(member, body)
        resolve = self._regex_changed(group, old.subscribed_topic_regex, member, records)
        if is_new or changed:
            records.append((crec.key(crec.MEMBER_METADATA, group_id, member.member_id),
                            crec.member_metadata_value(self._metadata_of(member))))
        bump = is_new or changed
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            records.append((crec.key(crec.PARTITION_METADATA, group_id),
                            crec.partition_metadata_value(metadata)))
            bump = True
        if bump:
            group.group_epoch += 1
            records.append((crec.key(crec.GROUP_METADATA, group_id),
                            crec.epoch_value(group.group_epoch)))
        if group.group_epoch > group.assignment_epoch:
            records += self._compute_target(group)
        owned = self._owned(body["topic_partitions"])
        self._reconcile(group, member, owned, now)
        if self._assignment_changed(old, member) or is_new:
            records.append(self._current_assignment_record(group_id, member))
        self._append(group_id, records)
        self._maybe_resolve(group, resolve, describable)
        send_assignment = (is_new or self._assignment_changed(old, member)
                           or (owned is not None and owned != owned_pairs(member.assigned)))
        return {
            "throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "member_id": member.member_id, "member_epoch": member.member_epoch,
            "heartbeat_interval_ms": self.heartbeat_interval_ms(group_id),
            "assignment": ({"topic_partitions": _wire_assignment(member.assigned)}
                           if send_assignment else None),
        }

    def _group_for_heartbeat(self, group_id: str, create: bool,
                             records: list[Record]) -> ConsumerGroup:
        holder = self.parent.groups.get(group_id)
        if holder is None:
            if not create:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                     f"Consumer group {group_id} not found.")
            holder = self.parent.groups[group_id] = Group(group_id, self.parent.wall())
        if holder.consumer is None:
            # an empty classic group (committed offsets only) becomes a consumer group,
            # a live one stays classic: Kafka's rule without online migration
            if holder.members or not create:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                     f"Group {group_id} is not a consumer group.")
            if holder.protocol_type is not None or holder.generation:
                from pybroker.group import records as rec
                records.append((rec.group_key(group_id), None))
                holder.protocol_type, holder.generation = None, 0
                holder.protocol = holder.leader = None
            holder.consumer = ConsumerGroup(group_id)
        consumer: ConsumerGroup = holder.consumer
        return consumer

    def _member_for_heartbeat(self, group: ConsumerGroup, body: Body, version: int,
                              records: list[Record]) -> tuple[ConsumerMember, bool]:
        member_id = body["member_id"] or ""
        epoch = body["member_epoch"]
        instance_id = body["instance_id"]
        if epoch == 0:
            if version == 0 and not member_id:
                member_id = uuid.uuid4().hex
            if instance_id is not None:
                previous = group.static_member(instance_id)
                if previous is not None and previous.member_id != member_id:
                    if previous.member_epoch != LEAVE_STATIC_EPOCH:
                        raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                             f"Static member {previous.member_id} with "
                                             f"instance id {instance_id} is not released "
                                             "yet.")
                    return self._replace_static(group, previous, member_id, records), False
            existing = group.members.get(member_id)
            if existing is not None and existing.member_epoch == LEAVE_STATIC_EPOCH:
                existing.member_epoch = existing.previous_member_epoch
                return existing, False
            if existing is not None:
                # a member rejoining (after being fenced, say) starts over
                self._remove_member(group, existing, records)
            if len(group.members) >= self.config.max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The consumer group has reached its maximum capacity of "
                                     f"{self.config.max_size} members.")
            member = ConsumerMember(member_id, instance_id=instance_id)
            group.members[member_id] = member
            return member, True
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group "
                                 f"{group.group_id}.")
        if instance_id is not None and member.instance_id not in (None, instance_id):
            raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Member {member_id} has instance id {member.instance_id}.")
        if epoch > member.member_epoch:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a greater member epoch "
                                 f"({epoch}) than the one known by the group coordinator "
                                 f"({member.member_epoch}). The member must abandon all its "
                                 "partitions and rejoin.")
        if epoch < member.member_epoch:
            # the answer that moved it to the new epoch may have been lost: the previous
            # epoch is accepted with owned partitions it still has
            owned = self._owned(body["topic_partitions"])
            if epoch != member.previous_member_epoch or owned is None \
                    or not owned <= owned_pairs(member.assigned):
                raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"The consumer group member has a smaller member epoch "
                                     f"({epoch}) than the one known by the group coordinator "
                                     f"({member.member_epoch}). The member must abandon all "
                                     "its partitions and rejoin.")
        return member, False

    def _replace_static(self, group: ConsumerGroup, previous: ConsumerMember, member_id: str,
                        records: list[Record]) -> ConsumerMember:
        """A static member back with a new member id takes over its predecessor's
        epoch and partitions (no rebalance)."""
        gid = group.group_id
        for record_type in (crec.CURRENT_MEMBER_ASSIGNMENT, crec.TARGET_ASSIGNMENT_MEMBER,
                            crec.MEMBER_METADATA):
            records.append((crec.key(record_type, gid, previous.member_id), None))
        del group.members[previous.member_id]
        target = group.target.pop(previous.member_id, {})
        member = dataclasses.replace(previous, member_id=member_id)
        member.member_epoch = previous.previous_member_epoch
        group.members[member_id] = member
        group.target[member_id] = target
        records.append((crec.key(crec.MEMBER_METADATA, gid, member_id),
                        crec.member_metadata_value(self._metadata_of(member))))
        records.append((crec.key(crec.TARGET_ASSIGNMENT_MEMBER, gid, member_id),
                        crec.target_member_value(target)))
        records.append(self._current_assignment_record(gid, member))
        log.info("group %s: static member %s rejoined as %s", gid, member.instance_id,
                 member_id)
        return member

    def _update_member(self, member: ConsumerMember, body: Body) -> bool:
        """Apply the non-null fields of a heartbeat; True when the subscription or
        another persisted field changed."""
        before = self._metadata_of(member)
        if body["instance_id"] is not None:
            member.instance_id = body["instance_id"]
        if body["rack_id"] is not None:
            member.rack_id = body["rack_id"]
        if body["rebalance_timeout_ms"] != -1:
            member.rebalance_timeout_ms = body["rebalance_timeout_ms"]
        if body["subscribed_topic_names"] is not None:
            member.subscribed_topic_names = sorted(set(body["subscribed_topic_names"]))
        if body.get("subscribed_topic_regex") is not None:
            member.subscribed_topic_regex = body["subscribed_topic_regex"] or None
        if body["server_assignor"] is not None:
            member.server_assignor = body["server_assignor"]
        return self._metadata_of(member) != before

    @staticmethod
    def _metadata_of(member: ConsumerMember) -> crec.MemberMetadata:
        return crec.MemberMetadata(member.instance_id, member.rack_id, member.client_id,
                                   member.client_host, list(member.subscribed_topic_names),
                                   member.subscribed_topic_regex, member.rebalance_timeout_ms,
                                   member.server_assignor)

    # --- subscriptions and the target assignment ---------------------------------------
    @staticmethod
    def _member_topics(member: ConsumerMember, topics: dict[str, tuple[uuid.UUID, int]],
                       resolved: dict[str, crec.ResolvedRegex]) -> set[str]:
        """The member's literal topic names and what its regex resolved to (nothing
        while unresolved), those that exist."""
        names = {t for t in member.subscribed_topic_names if t in topics}
        regex = member.subscribed_topic_regex
        if regex and regex in resolved:
            names |= {t for t in resolved[regex].topics if t in topics}
        return names

    def _subscription_metadata(self, group: ConsumerGroup,
                               resolved: dict[str, crec.ResolvedRegex] | None = None
                               ) -> dict[str, tuple[uuid.UUID, int]]:
        topics = self.topics.topics()
        if resolved is None:
            resolved = group.resolved_regexes
        subscribed: set[str] = set()
        for member in group.members.values():
            subscribed |= self._member_topics(member, topics, resolved)
        return {name: topics[name] for name in sorted(subscribed)}

    # --- regex subscriptions (resolved off the heartbeat) -------------------------------
    def _regex_changed(self, group: ConsumerGroup, old_regex: str | None,
                       member: ConsumerMember, records: list[Record]) -> bool:
        """Book a member's change of regex: the old one's resolution goes when no
        member subscribes with it any more; True when the new one is new to the group
        (it must be resolved)."""
        new_regex = member.subscribed_topic_regex
        if old_regex == new_regex:
            return False
        if old_regex:
            self._drop_regex_if_unused(group, old_regex, records)
        return bool(new_regex) and \
            group.regex_subscribers(new_regex, exclude=member.member_id) == 0

    @staticmethod
    def _drop_regex_if_unused(group: ConsumerGroup, regex: str, records: list[Record]) -> None:
        if group.regex_subscribers(regex) == 0 and regex in group.resolved_regexes:
            del group.resolved_regexes[regex]
            records.append((crec.key(crec.REGULAR_EXPRESSION, group.group_id, regex), None))

    def topics_version(self) -> int:
        """The version of the topic names: moves (to the wall-clock ms, strictly
        increasing) whenever a topic was created since the last look."""
        created = self.topics.created()
        if created != self._created_seen:
            self._created_seen = created
            self._topics_version = max(int(self.parent.wall()), self._topics_version + 1)
        return self._topics_version

    def _maybe_resolve(self, group: ConsumerGroup, required: bool,
                       describable: Callable[[str], bool] | None = None) -> None:
        """Schedule a resolution of the group's regexes when one is unresolved (or
        just brought), topics were created since the last one, or the refresh
        interval passed; never while one runs, nor within MIN_REFRESH_INTERVAL_MS of
        the last (Kafka aligns a group's refreshes so they cost one rebalance)."""
        subscribed = group.subscribed_regexes()
        if not subscribed or self.executor.is_scheduled(group.group_id):
            return
        now = int(self.parent.wall())
        last = group.last_regex_refresh_ms()
        if last is not None and now <= last + regexes.MIN_REFRESH_INTERVAL_MS:
            return
        version = self.topics_version()
        required = (required or subscribed != set(group.resolved_regexes)
                    or any(r.version < version for r in group.resolved_regexes.values())
                    or (last is not None
                        and now > last + self.config.regex_refresh_interval_ms))
        if not required:
            return
        names = self.topics.names()
        wanted = sorted(subscribed)
        log.debug("group %s: resolving regexes %s over %d topics", group.group_id, wanted,
                  len(names))
        self.executor.schedule(
            group.group_id, lambda: regexes.resolve(wanted, names),
            lambda result: self._resolved(group, version, now, result, describable))

    def _resolved(self, group: ConsumerGroup, version: int, started_ms: int,
                  result: dict[str, frozenset[str]] | None,
                  describable: Callable[[str], bool] | None = None) -> None:
        """Apply a finished resolution (Kafka's handleRegularExpressionsResult):
        record each still-subscribed regex's topics, and bump the group epoch when
        what they match or the subscribed topics' metadata changed, so the next
        heartbeat computes a new target."""
        gid = group.group_id
        holder = self.parent.groups.get(gid)
        if result is None or holder is None or holder.consumer is not group \
                or self.parent.coordinator_error(gid) is not None:
            return  # failed, or the group died or moved meanwhile
        resolved = dict(group.resolved_regexes)
        records: list[Record] = []
        bump = False
        for regex in [r for r in resolved if group.regex_subscribers(r) == 0]:
            # no member uses it (a tombstone that never made it): else it would look
            # unresolved-for-ever and bring a resolution every 10 s
            del resolved[regex]
            records.append((crec.key(crec.REGULAR_EXPRESSION, gid, regex), None))
        if describable is not None:
            result = {regex: frozenset(t for t in topics if _may(describable, t))
                      for regex, topics in result.items()}
        for regex, topics in sorted(result.items()):
            if group.regex_subscribers(regex) == 0:
                continue  # unsubscribed meanwhile
            previous = resolved.get(regex)
            bump |= previous is None or previous.topics != topics
            resolved[regex] = crec.ResolvedRegex(topics, version, started_ms)
            records.append((crec.key(crec.REGULAR_EXPRESSION, gid, regex),
                            crec.regex_value(resolved[regex])))
        metadata = self._subscription_metadata(group, resolved)
        if metadata != group.subscription_metadata:
            bump = True
            records.append((crec.key(crec.PARTITION_METADATA, gid),
                            crec.partition_metadata_value(metadata)))
        if bump:
            records.append((crec.key(crec.GROUP_METADATA, gid),
                            crec.epoch_value(group.group_epoch + 1)))
        try:
            self._append(gid, records)
        except HeartbeatError:
            return  # logged; a later heartbeat resolves again
        group.resolved_regexes = resolved
        group.subscription_metadata = metadata
        if bump:
            group.group_epoch += 1
            log.info("group %s: regexes resolved, group epoch %d", gid, group.group_epoch)

    def _select_assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for (Kafka's rule), else the first configured."""
        votes: dict[str, int] = {}
        for member in group.members.values():
            if member.server_assignor:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda name: votes[name])
        return self.config.assignors[0]

    def _compute_target(self, group: ConsumerGroup) -> list[Record]:
        topics = self.topics.topics()
        name = self._select_assignor(group)
        subscriptions = {m.member_id: frozenset(
            topics[t][0] for t in self._member_topics(m, topics, group.resolved_regexes))
            for m in group.members.values()}
        counts = {topic_id: count for topic_id, count in group.subscription_metadata.values()}
        target = ASSIGNORS[name](subscriptions, counts, group.target)
        records: list[Record] = []
        for member_id, assignment in target.items():
            if group.target.get(member_id) != assignment or member_id not in group.target:
                records.append((crec.key(crec.TARGET_ASSIGNMENT_MEMBER, group.group_id,
                                         member_id), crec.target_member_value(assignment)))
        group.target = target
        group.assignment_epoch = group.group_epoch
        group.assignor = name
        records.append((crec.key(crec.TARGET_ASSIGNMENT_METADATA, group.group_id),
                        crec.epoch_value(group.assignment_epoch)))
        log.info("group %s: target assignment at epoch %d by %s", group.group_id,
                 group.assignment_epoch, name)
        return records

    # --- reconciliation ----------------------------------------------------------------
    def _owned(self, topic_partitions: list[Body] | None) -> set[tuple[uuid.UUID, int]] | None:
        if topic_partitions is None:
            return None
        return {(tp["topic_id"], p)
                for tp in topic_partitions for p in tp["partitions"] or []}

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember,
                   owned: set[tuple[uuid.UUID, int]] | None, now: float) -> None:
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & owned_pairs(member.pending_revocation):
                return  # not acknowledged yet
            member.pending_revocation = {}
            member.revocation_deadline_ms = None
        elif member.member_epoch == group.assignment_epoch \
                and member.state == MemberState.STABLE:
            return
        target = owned_pairs(group.target.get(member.member_id, {}))
        current = owned_pairs(member.assigned)
        revoke = current - target
        if revoke:
            member.assigned = from_pairs(current & target)
            member.pending_revocation = from_pairs(revoke)
            member.state = MemberState.UNREVOKED_PARTITIONS
            timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 \
                else self.session_timeout_ms(group.group_id)
            member.revocation_deadline_ms = now + timeout
            return
        wanted = target - current
        free = wanted - group.owners(member.member_id)
        member.assigned = from_pairs(current | free)
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.state = (MemberState.UNRELEASED_PARTITIONS if wanted - free
                        else MemberState.STABLE)

    @staticmethod
    def _assignment_changed(old: ConsumerMember, new: ConsumerMember) -> bool:
        return (old.member_epoch, old.state, old.assigned, old.pending_revocation) != \
            (new.member_epoch, new.state, new.assigned, new.pending_revocation)

    @staticmethod
    def _current_assignment_record(group_id: str, member: ConsumerMember) -> Record:
        value = crec.CurrentAssignment(member.member_epoch, member.previous_member_epoch,
                                       int(member.state), member.assigned,
                                       member.pending_revocation)
        return (crec.key(crec.CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id),
                crec.current_assignment_value(value))

    # --- leaving and expiry --------------------------------------------------------------
    def _leave(self, group_id: str, member_id: str, epoch: int, instance_id: str | None) -> Body:
        group = self.group(group_id)
        if group is None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Consumer group {group_id} not found.")
        member = group.members.get(member_id)
        if member is None and instance_id is not None:
            member = group.static_member(instance_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
        records: list[Record] = []
        if epoch == LEAVE_STATIC_EPOCH:
            # the static member keeps its partitions until it returns or its session ends
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_STATIC_EPOCH
            records.append(self._current_assignment_record(group_id, member))
            log.info("group %s: static member %s left temporarily", group_id, instance_id)
        else:
            self._remove_member(group, member, records)
            log.info("group %s: member %s left", group_id, member_id)
        self._append(group_id, records)
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "member_id": member.member_id, "member_epoch": epoch,
                "heartbeat_interval_ms": 0, "assignment": None}

    def _remove_member(self, group: ConsumerGroup, member: ConsumerMember,
                       records: list[Record]) -> None:
        """Drop a member (left, fenced, expired): its partitions are free at once, and
        the group epoch moves so the others get a new target."""
        gid = group.group_id
        for record_type in (crec.CURRENT_MEMBER_ASSIGNMENT, crec.TARGET_ASSIGNMENT_MEMBER,
                            crec.MEMBER_METADATA):
            records.append((crec.key(record_type, gid, member.member_id), None))
        group.members.pop(member.member_id, None)
        group.target.pop(member.member_id, None)
        if member.subscribed_topic_regex:
            self._drop_regex_if_unused(group, member.subscribed_topic_regex, records)
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            records.append((crec.key(crec.PARTITION_METADATA, gid),
                            crec.partition_metadata_value(metadata)))
        group.group_epoch += 1
        records.append((crec.key(crec.GROUP_METADATA, gid), crec.epoch_value(group.group_epoch)))

    def tick(self, now: float) -> None:
        """Remove members whose session ended or whose revocation is overdue, and
        start a new target when subscribed topics changed (partitions added)."""
        for holder in list(self.parent.groups.values()):
            group = holder.consumer
            if group is None or not group.members:
                continue
            records: list[Record] = []
            for member in list(group.members.values()):
                overdue = member.revocation_deadline_ms is not None \
                    and now >= member.revocation_deadline_ms
                if now >= member.session_deadline_ms or overdue:
                    log.info("group %s: member %s %s", group.group_id, member.member_id,
                             "did not revoke in time" if overdue else "session expired")
                    self._remove_member(group, member, records)
            if records:
                self._append_quietly(group.group_id, records)

    # --- offsets -------------------------------------------------------------------------
    def commit_error(self, group: ConsumerGroup, member_epoch: int, member_id: str
                     ) -> ErrorCode | None:
        """OffsetCommit to a consumer group (Kafka's ConsumerGroup.validateOffsetCommit):
        without a member (epoch < 0) only while the group is empty; else the member
        must exist and send its current epoch."""
        if member_epoch < 0 and not group.members:
            return None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.group(group_id)
        return group is not None and member_id in group.members

    def fetch_error(self, group_id: str, member_id: str | None, member_epoch: int
                    ) -> ErrorCode | None:
        """OffsetFetch v9 (Kafka's validateOffsetFetch): a member fetching offsets must
        be one, at its current epoch; an admin (no member id, epoch -1) may always."""
        group = self.group(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    # --- coexistence with classic groups -----------------------------------------------
    def join_error(self, group_id: str, protocol_type: str) -> ErrorCode | None:
        """A classic JoinGroup to a consumer group. An empty one turns into a classic
        group (its offsets kept); a live one refuses: INCONSISTENT_GROUP_PROTOCOL for a
        protocol type it cannot hold, else GROUP_ID_NOT_FOUND (classic members inside
        a consumer group, Kafka's online migration, are not supported)."""
        holder = self.parent.groups.get(group_id)
        group = holder.consumer if holder is not None else None
        if holder is None or group is None:
            return None
        if group.members:
            if protocol_type != "consumer":
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            return ErrorCode.GROUP_ID_NOT_FOUND
        self._append_quietly(group_id, self.tombstones(holder))
        holder.consumer = None
        return None

    def tombstones(self, holder: Group) -> list[Record]:
        """Records deleting a consumer group's state (the group is deleted or dies)."""
        return [] if holder.consumer is None else replay.tombstones(holder.consumer)

    # --- ConsumerGroupDescribe -----------------------------------------------------------
    def describe(self, group_id: str) -> Body:
        if not group_id:
            return not_described(group_id, ErrorCode.INVALID_GROUP_ID)
        if (code := self.parent.coordinator_error(group_id)) is not None:
            return not_described(group_id, code)
        holder = self.parent.groups.get(group_id)
        group = holder.consumer if holder is not None else None
        if group is None:
            return not_described(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {group_id} is not a consumer group."
                                 if holder is not None else f"Group {group_id} not found.")
        return described_group(group, self.topics.topics(),
                               group.assignor or self._select_assignor(group))

    # --- persistence -----------------------------------------------------------------
    def _append(self, group_id: str, records: list[Record]) -> None:
        if not records:
            return
        try:
            self.parent.store.append(group_id, records)
        except Exception as exc:
            log.warning("group %s: storing consumer group records failed: %s", group_id, exc)
            raise HeartbeatError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from None

    def _append_quietly(self, group_id: str, records: list[Record]) -> None:
        try:
            self._append(group_id, records)
        except HeartbeatError:
            pass

    def load(self, partition: int | None = None) -> None:
        """Rebuild the consumer groups of one offsets partition (or all) after the
        classic coordinator loaded its groups and offsets; members get a fresh
        session, as Kafka gives them on a new coordinator."""
        rebuilt: dict[str, ConsumerGroup] = {}
        # keys whose latest record could not be read (a later readable one replaces it):
        # their groups are refused, as the classic load refuses its groups
        unreadable: set[crec.ConsumerKey] = set()
        for key_bytes, value in self.parent.store.load(partition):
            try:
                key = crec.decode_key(key_bytes)
            except (ValueError, IndexError, UnicodeDecodeError, struct.error) as exc:
                log.error("a consumer group record key cannot be read (%s): every group of "
                          "the partition is refused", exc)
                unreadable.add(crec.ConsumerKey(-1, ANY_GROUP))
                continue
            if key is None:
                continue
            try:
                replay.apply(key, value, rebuilt)
                unreadable.discard(key)
            except (ValueError, IndexError, UnicodeDecodeError, struct.error) as exc:
                log.error("a record of consumer group %r cannot be read (%s): the group is "
                          "refused", key.group, exc)
                unreadable.add(key)
        if unreadable:
            self.parent.unreadable.setdefault(partition, set()).update(
                k.group for k in unreadable)
        now = self.parent.clock()
        for group_id, group in rebuilt.items():
            # a member record without metadata was half written: drop it
            for member_id in [m for m, v in group.members.items() if not v.client_host
                              and not v.subscribed_topic_names
                              and not v.subscribed_topic_regex]:
                del group.members[member_id]
            for member in group.members.values():
                member.session_deadline_ms = now + self.session_timeout_ms(group_id)
            group.assignor = self._select_assignor(group)
            holder = self.parent.groups.get(group_id)
            if holder is None:
                holder = self.parent.groups[group_id] = Group(group_id, self.parent.wall())
            holder.consumer = group
        if rebuilt:
            log.debug("loaded %d consumer groups", len(rebuilt))


def _may(describable: Callable[[str], bool], topic: str) -> bool:
    """An authorization that fails is a refusal."""
    try:
        return bool(describable(topic))
    except Exception:
        log.exception("authorizing DESCRIBE on topic %s failed: left out of the regex", topic)
        return False


def _wire_assignment(assignment: crec.Assignment) -> list[Body]:
    return [{"topic_id": topic_id, "partitions": sorted(parts)}
            for topic_id, parts in sorted(assignment.items(), key=lambda kv: kv[0].bytes)
            if parts]

