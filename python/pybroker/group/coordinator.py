"""The group coordinator: Kafka's classic group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) and committed offsets, for every group on this broker.

Everything runs on the broker's event loop; nothing here blocks. A JoinGroup or
SyncGroup that must wait parks on a `Waiter` completed by another request or by
`tick()`, which `run()` calls every TICK_MS to enforce the deadlines (session
timeouts, rebalance timeouts, the initial rebalance delay, offset retention).
Time comes from `clock` (monotonic ms) and `wall` (epoch ms) so tests can fake it.
Every state change that Kafka persists is appended to the store before the
request is answered."""

from __future__ import annotations

import dataclasses
import logging
import struct
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import anyio

from pybroker import _core
from pybroker.errors import BUG_REPORT, ErrorCode, KafkaError
from pybroker.group import records as rec
from pybroker.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from pybroker.group.member import Member, Waiter
from pybroker.group.offsets import OFFSETS_TOPIC, Appended, GroupStore, OffsetsTopic
from pybroker.group.state import ANY_GROUP, Group, GroupState, InitialDelay, OffsetEntry
from pybroker.group.txn_offsets import TxnData, TxnMarker, TxnOffsets
from pybroker.phase_log import Tally

if TYPE_CHECKING:
    from pybroker.admin.topics import TopicAdmin
    from pybroker.config import BrokerConfig
    from pybroker.metadata.cache import MetadataCache
    from pybroker.replica.manager import ReplicaManager

log = logging.getLogger(__name__)
#: what a failed write of a group's records means to an operator
STORE = ("; its clients get COORDINATOR_NOT_AVAILABLE and retry. If it repeats, check "
         "the log dir of the group's __consumer_offsets partition")

TICK_MS = 100
#: Kafka error 86, not in the shared enum yet
GROUP_SUBSCRIBED_TO_TOPIC = 86
#: the log's refusals of a TxnOffsetCommit's batch by its producer state -> the client's
#: error (Kafka's storeOffsets passes these through)
TXN_APPEND_ERROR_CODES: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (_core.InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (_core.OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (_core.InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
)
TXN_APPEND_ERRORS = tuple(t for t, _ in TXN_APPEND_ERROR_CODES)

S = GroupState
Body = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 10080 * 60000
    offsets_retention_check_interval_ms: int = 600000

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> GroupConfig:
        return cls(
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60000,
            offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        )


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


def _wall_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        store: GroupStore,
        partition_exists: Callable[[str, int], bool],
        *,
        clock: Callable[[], float] = _monotonic_ms,
        wall: Callable[[], int] = _wall_ms,
    ) -> None:
        self.config = config
        self.store = store
        self.partition_exists = partition_exists
        self.clock = clock
        self.wall = wall
        self.groups: dict[str, Group] = {}
        self._next_retention_check_ms = 0.0
        #: the offsets-topic partitions whose groups this broker coordinates (it leads
        #: them); None: every group (a store without partitions, as in unit tests)
        self.owned: set[int] | None = None
        #: TxnOffsetCommit offsets waiting for their transaction's marker
        self.txn_offsets = TxnOffsets()
        #: KIP-848 consumer groups, kept in the same table (Group.consumer)
        self.consumer = ConsumerGroupCoordinator(self)
        #: offsets partition (None: the whole store) -> groups with a record that could
        #: not be read when it was loaded (ANY_GROUP: a record whose key could not be read)
        self.unreadable: dict[int | None, set[str]] = {}
        #: the offsets partitions loaded in one burst (after a start, a failover): one
        #: INFO line for them all
        self.load_tally = Tally(log, lambda counts, partitions, seconds: (
            f"loaded {counts['groups']} groups from {counts['records']} {OFFSETS_TOPIC} "
            f"records of {partitions} partitions in {seconds:.2f} s"))

    @classmethod
    def for_broker(cls, config: BrokerConfig, metadata: MetadataCache, replicas: ReplicaManager,
                   admin: TopicAdmin) -> GroupCoordinator:
        from pybroker.group.consumer.topics import MetadataTopics

        coordinator = cls(GroupConfig.from_broker(config),
                          OffsetsTopic(config, metadata, replicas, admin),
                          lambda topic, index: metadata.partition(topic, index) is not None)
        coordinator.consumer = ConsumerGroupCoordinator(
            coordinator, ConsumerGroupConfig.from_broker(config), MetadataTopics(metadata))
        return coordinator

    # --- ownership: the coordinator of a group leads its offsets partition ----------
    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        """NOT_COORDINATOR when another broker coordinates the group (it leads the
        group's offsets partition), else None."""
        partition = None if self.owned is None else self.store.partition_of(group_id)
        if self.owned is not None and partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        bad = self.unreadable.get(partition)
        if bad and (group_id in bad or ANY_GROUP in bad):
            # part of its state could not be loaded (see load): it is not served from
            # what could, which might hand out an older committed offset, or none
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def partition_led(self, index: int) -> None:
        """This broker now leads offsets partition `index`: load its groups from the
        (replicated) log and coordinate them."""
        if self.owned is None:
            self.owned = set()
        if index in self.owned:
            return
        self.owned.add(index)
        self.load(index)

    def partition_lost(self, index: int) -> None:
        """Another broker leads offsets partition `index` now: forget its groups; their
        members find the new coordinator after NOT_COORDINATOR."""
        if self.owned is None:
            self.owned = set()
        self.owned.discard(index)
        self.unreadable.pop(index, None)
        self.txn_offsets.forget_partition(index)
        self.txn_offsets.drop_groups({g for p in self.txn_offsets.pending.values() for g in p
                                      if self.store.partition_of(g) == index})
        for group_id in [g for g in self.groups if self.store.partition_of(g) == index]:
            group = self.groups.pop(group_id)
            group.state = S.DEAD
            for member in group.members.values():
                member.finish_join(join_error(ErrorCode.NOT_COORDINATOR, member.member_id))
                member.finish_sync(sync_error(ErrorCode.NOT_COORDINATOR))
        log.debug("no longer coordinating the groups of offsets partition %d", index)

    # --- lifecycle ------------------------------------------------------------------
    def load(self, partition: int | None = None) -> None:
        """Rebuild groups and offsets from the store: one offsets partition's, or all."""
        started = time.monotonic()
        metas: dict[str, rec.GroupValue | None] = {}
        offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        # (group, what) whose latest record could not be read: what is a (topic,
        # partition) of its offsets, or "group" for its metadata; a later readable record
        # of the same key replaces it
        unreadable: set[tuple[str, object]] = set()
        count = 0
        for item in self.store.load(partition, transactions=True):
            if isinstance(item, TxnMarker):
                self._replay_marker(item, partition, offsets)
                continue
            key_bytes, value = item[0], item[1]
            try:
                key = rec.decode_key(key_bytes)
            except (ValueError, IndexError, UnicodeDecodeError, struct.error) as exc:
                log.error("a __consumer_offsets record key cannot be read (%s): every group "
                          "of the partition is refused", exc)
                unreadable.add((ANY_GROUP, "group"))
                continue
            what: object = ((key.topic, key.partition) if isinstance(key, rec.OffsetKey)
                            else "group")
            try:
                if isinstance(item, TxnData):
                    self.txn_offsets.seen(item.partition, item.producer_id, item.producer_epoch,
                                          item.last_sequence)
                    if isinstance(key, rec.OffsetKey):
                        if value is None:
                            self.txn_offsets.remove(item.producer_id, key.group,
                                                    (key.topic, key.partition))
                        else:
                            v = rec.decode_offset_value(value)
                            self.txn_offsets.add(item.producer_id, key.group, [(
                                (key.topic, key.partition),
                                OffsetEntry(v.offset, v.leader_epoch, v.metadata,
                                            v.commit_timestamp))])
                    count += 1
                    continue
                if isinstance(key, rec.OffsetKey):
                    entries = offsets.setdefault(key.group, {})
                    if value is None:
                        entries.pop((key.topic, key.partition), None)
                    else:
                        v = rec.decode_offset_value(value)
                        entries[(key.topic, key.partition)] = OffsetEntry(
                            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)
                elif isinstance(key, rec.GroupKey):
                    metas[key.group] = None if value is None else rec.decode_group_value(value)
                count += 1
                if key is not None and not isinstance(item, TxnData):
                    unreadable.discard((key.group, what))
            except (ValueError, IndexError, UnicodeDecodeError, struct.error) as exc:
                if key is None:
                    continue
                log.error("a __consumer_offsets record of group %r cannot be read (%s): the "
                          "group is refused", key.group, exc)
                unreadable.add((key.group, what))
        self.unreadable.pop(partition, None)
        if unreadable:
            self.unreadable[partition] = {group for group, _ in unreadable}
        now = self.clock()
        for group_id in set(metas) | {g for g, o in offsets.items() if o}:
            meta = metas.get(group_id)
            if meta is None and not offsets.get(group_id):
                continue
            group = Group(group_id, self.wall())
            group.offsets = offsets.get(group_id, {})
            if meta is not None:
                group.protocol_type = meta.protocol_type or None
                group.generation = meta.generation
                group.protocol = meta.protocol
                group.leader = meta.leader
                group.state_timestamp_ms = meta.current_state_timestamp
                for m in meta.members:
                    member = Member(m.member_id, m.group_instance_id, m.client_id,
                                    m.client_host, m.session_timeout, m.rebalance_timeout,
                                    meta.protocol_type, [(meta.protocol or "", m.subscription)],
                                    m.assignment, now + m.session_timeout, is_new=False)
                    group.add(member)
                group.protocol_type = meta.protocol_type or None
                if group.members:
                    group.state = S.STABLE
            self.groups[group_id] = group
        loaded = sum(1 for g in self.groups
                     if partition is None or self.store.partition_of(g) == partition)
        log.debug("loaded %d groups from %d __consumer_offsets records%s", loaded, count,
                  "" if partition is None else f" of partition {partition}")
        self.load_tally.add(time.monotonic() - started, groups=loaded, records=count)
        self.consumer.load(partition)

    def _replay_marker(self, marker: TxnMarker, partition: int | None,
                       offsets: dict[str, dict[tuple[str, int], OffsetEntry]]) -> None:
        """A COMMIT/ABORT replayed from offsets partition `partition`: the producer's
        pending offsets of that partition's groups become committed or are dropped."""
        pending = self.txn_offsets.pending.get(marker.producer_id, {})
        groups = {g for g in pending
                  if partition is None or self.store.partition_of(g) == partition}
        for group_id, entries in self.txn_offsets.complete(marker.producer_id, groups).items():
            if marker.commit:
                offsets.setdefault(group_id, {}).update(entries)

    async def store_ready(self) -> None:
        """Create the offsets topic now (FindCoordinator), as Kafka does."""
        try:
            await self.store.ensure()
        except Exception:
            log.exception("creating the offsets topic failed: consumer groups get "
                          "COORDINATOR_NOT_AVAILABLE and retry. Check the cluster has "
                          "offsets.topic.replication.factor live brokers")

    async def run(self) -> None:
        """Enforce deadlines until cancelled."""
        while True:
            await anyio.sleep(TICK_MS / 1000)
            try:
                self.tick()
            except Exception:
                log.exception("group coordinator tick failed")

    def tick(self) -> None:
        now = self.clock()
        for group in list(self.groups.values()):
            self._enforce_deadlines(group, now)
        self.consumer.tick(now)
        if now >= self._next_retention_check_ms:
            self._next_retention_check_ms = now + self.config.offsets_retention_check_interval_ms
            self.expire_offsets()

    # --- JoinGroup -------------------------------------------------------------------
    async def join_group(
        self, group_id: str, member_id: str, group_instance_id: str | None,
        protocol_type: str, protocols: list[tuple[str, bytes]], session_timeout_ms: int,
        rebalance_timeout_ms: int, client_id: str, client_host: str, version: int,
    ) -> Body:
        if not group_id:
            return join_error(ErrorCode.INVALID_GROUP_ID, member_id)
        if (code := self.coordinator_error(group_id)) is not None:
            return join_error(code, member_id)
        if not (self.config.min_session_timeout_ms <= session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return join_error(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has none: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        if (code := self.consumer.join_error(group_id, protocol_type)) is not None:
            return join_error(code, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = Group(group_id, self.wall())
        if group.is_(S.DEAD):
            return join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports(protocol_type, [name for name, _ in protocols]):
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        now = self.clock()
        if not member_id:
            if group_instance_id is not None:
                if group_instance_id in group.static:
                    return await self._rejoin_static(
                        group, group_instance_id, protocols, session_timeout_ms,
                        rebalance_timeout_ms, client_id, client_host)
            else:
                new_id = f"{client_id}-{uuid.uuid4()}"
                if version >= 4:
                    group.pending[new_id] = now + session_timeout_ms
                    return join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id)
                member_id = new_id
            if not member_id:
                member_id = f"{group_instance_id}-{uuid.uuid4()}"
            return await self._add_member(
                group, member_id, group_instance_id, protocol_type, protocols,
                session_timeout_ms, rebalance_timeout_ms, client_id, client_host)
        if member_id in group.pending:
            del group.pending[member_id]
            return await self._add_member(
                group, member_id, group_instance_id, protocol_type, protocols,
                session_timeout_ms, rebalance_timeout_ms, client_id, client_host)
        fenced = self._fenced(group, member_id, group_instance_id)
        if fenced is not None:
            return join_error(fenced, member_id)
        member = group.members.get(member_id)
        if member is None or group.is_(S.EMPTY):
            return join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        member.heartbeat_deadline_ms = now + session_timeout_ms
        if group.is_(S.PREPARING_REBALANCE):
            return await self._update_and_wait(group, member, protocols, session_timeout_ms,
                                               rebalance_timeout_ms, rebalance=False)
        if group.is_(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                return self._join_response(group, member)
            return await self._update_and_wait(group, member, protocols, session_timeout_ms,
                                               rebalance_timeout_ms, rebalance=True)
        # Stable
        if group.leader == member_id or not member.matches(protocols):
            return await self._update_and_wait(group, member, protocols, session_timeout_ms,
                                               rebalance_timeout_ms, rebalance=True)
        return self._join_response(group, member)

    async def _add_member(
        self, group: Group, member_id: str, group_instance_id: str | None, protocol_type: str,
        protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
        client_id: str, client_host: str,
    ) -> Body:
        member = Member(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, protocol_type, protocols,
                        heartbeat_deadline_ms=self.clock() + session_timeout_ms)
        waiter = member.join_waiter = Waiter()
        group.add(member)
        if group.initial_delay is not None:
            group.initial_delay.new_member_added = True
        if group.is_(S.PREPARING_REBALANCE):
            # a longer rebalance timeout extends the join phase
            group.rebalance_deadline_ms = max(group.rebalance_deadline_ms,
                                              self.clock() + rebalance_timeout_ms)
        else:
            self._prepare_rebalance(group, f"member {member_id} joined")
        self._maybe_complete_join(group)
        return await waiter.wait()

    async def _update_and_wait(
        self, group: Group, member: Member, protocols: list[tuple[str, bytes]],
        session_timeout_ms: int, rebalance_timeout_ms: int, *, rebalance: bool,
    ) -> Body:
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        if member.join_waiter is not None:  # a retried join replaces the one in flight
            member.finish_join(join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        waiter = member.join_waiter = Waiter()
        if rebalance:
            self._prepare_rebalance(group, f"member {member.member_id} rejoined")
        self._maybe_complete_join(group)
        return await waiter.wait()

    async def _rejoin_static(
        self, group: Group, instance_id: str, protocols: list[tuple[str, bytes]],
        session_timeout_ms: int, rebalance_timeout_ms: int, client_id: str, client_host: str,
    ) -> Body:
        """A known group.instance.id joins with no member id (a restarted static member):
        it takes over the old member (new id, same assignment)."""
        old_id = group.static[instance_id]
        new_id = f"{instance_id}-{uuid.uuid4()}"
        old = group.members[old_id]
        old.finish_join(join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        old.finish_sync(sync_error(ErrorCode.FENCED_INSTANCE_ID))
        old_protocol = group.protocol
        member = group.replace_static(old_id, new_id)
        previous = (member.protocols, member.client_id, member.client_host)
        member.protocols = protocols
        member.client_id, member.client_host = client_id, client_host
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.heartbeat_deadline_ms = self.clock() + session_timeout_ms
        log.info("group %s: static member %s rejoined as %s", group.group_id, instance_id, new_id)
        if group.is_(S.STABLE):
            if group.select_protocol() == old_protocol:
                try:
                    self._persist_group(group)
                except Exception:
                    member.protocols, member.client_id, member.client_host = previous
                    group.replace_static(new_id, old_id)
                    raise
                return self._join_response(group, member)
            return await self._update_and_wait(group, member, protocols, session_timeout_ms,
                                               rebalance_timeout_ms, rebalance=True)
        rebalance = group.is_(S.COMPLETING_REBALANCE)
        return await self._update_and_wait(group, member, protocols, session_timeout_ms,
                                           rebalance_timeout_ms, rebalance=rebalance)

    def _join_response(self, group: Group, member: Member) -> Body:
        members = []
        if member.member_id == group.leader:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata(group.protocol)}
                       for m in group.members.values()]
        return {"throttle_time_ms": 0, "error_code": 0, "generation_id": group.generation,
                "protocol_name": group.protocol or "", "leader": group.leader or "",
                "member_id": member.member_id, "members": members}

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.PREPARING_REBALANCE, S.DEAD):
            return
        if group.is_(S.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                member.finish_sync(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        was_empty = group.is_(S.EMPTY)
        now = self.clock()
        timeout = group.max_rebalance_timeout_ms()
        group.state = S.PREPARING_REBALANCE
        group.state_timestamp_ms = self.wall()
        group.rebalance_deadline_ms = now + timeout
        delay = self.config.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            first = min(delay, timeout)
            group.initial_delay = InitialDelay(now + first, delay, max(timeout - delay, 0))
        log.info("group %s: preparing rebalance (generation %d): %s", group.group_id,
                 group.generation, reason)

    def _maybe_complete_join(self, group: Group) -> None:
        if not group.is_(S.PREPARING_REBALANCE):
            return
        now = self.clock()
        delay = group.initial_delay
        if delay is not None:
            if now < delay.deadline_ms:
                return
            if delay.new_member_added and delay.remaining_ms > 0:
                step = min(delay.delay_ms, delay.remaining_ms)
                group.initial_delay = InitialDelay(now + step, delay.delay_ms,
                                                   max(delay.remaining_ms - step, 0))
                return
            group.initial_delay = None
            self._complete_join(group)
            return
        if group.all_joined() or now >= group.rebalance_deadline_ms:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        now = self.clock()
        for member in list(group.members.values()):
            if not member.awaiting_join:
                log.info("group %s: removing %s (did not rejoin in time)", group.group_id,
                         member.member_id)
                group.remove(member.member_id)
        group.pending.clear()
        group.generation += 1
        group.state_timestamp_ms = self.wall()
        if not group.members:
            group.state = S.EMPTY
            group.protocol = None
            group.leader = None
            log.info("group %s: empty at generation %d", group.group_id, group.generation)
            self._persist_group_quietly(group)
            return
        group.protocol = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = S.COMPLETING_REBALANCE
        group.sync_deadline_ms = now + group.max_rebalance_timeout_ms()
        log.info("group %s: generation %d with %d members, protocol %s, leader %s",
                 group.group_id, group.generation, len(group.members), group.protocol,
                 group.leader)
        for member in group.members.values():
            member.is_new = False
            member.heartbeat_deadline_ms = now + member.session_timeout_ms
            member.finish_join(self._join_response(group, member))

    # --- SyncGroup -------------------------------------------------------------------
    async def sync_group(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
        assignments: list[tuple[str, bytes]],
    ) -> Body:
        if not group_id:
            return sync_error(ErrorCode.INVALID_GROUP_ID)
        if (code := self.coordinator_error(group_id)) is not None:
            return sync_error(code)
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
        fenced = self._fenced(group, member_id, group_instance_id)
        if fenced is not None:
            return sync_error(fenced)
        member = group.members.get(member_id)
        if member is None:
            return sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation != group.generation:
            return sync_error(ErrorCode.ILLEGAL_GENERATION)
        if group.is_(S.EMPTY):
            return sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(S.PREPARING_REBALANCE):
            return sync_error(ErrorCode.REBALANCE_IN_PROGRESS)
        member.heartbeat_deadline_ms = self.clock() + member.session_timeout_ms
        if group.is_(S.STABLE):
            return sync_ok(member.assignment)
        # CompletingRebalance: wait for the leader's assignments
        member.finish_sync(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        waiter = member.sync_waiter = Waiter()
        if member_id == group.leader:
            given = dict(assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            try:
                self._persist_group(group)
            except Exception:
                log.exception("group %s: storing the assignment failed" + STORE,
                              group.group_id)
                for m in group.members.values():
                    m.assignment = b""
                    m.finish_sync(sync_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
                self._prepare_rebalance(group, "storing the assignment failed")
                return await waiter.wait()
            group.state = S.STABLE
            group.state_timestamp_ms = self.wall()
            log.info("group %s: stable at generation %d", group.group_id, group.generation)
            for m in group.members.values():
                m.finish_sync(sync_ok(m.assignment))
        return await waiter.wait()

    def _sync_timed_out(self, group: Group) -> None:
        """Members that did not SyncGroup within the rebalance timeout are removed."""
        for member in [m for m in group.members.values() if m.sync_waiter is None]:
            log.info("group %s: removing %s (no SyncGroup in time)", group.group_id,
                     member.member_id)
            group.remove(member.member_id)
        self._prepare_rebalance(group, "SyncGroup timed out")
        self._maybe_complete_join(group)

    # --- Heartbeat / LeaveGroup ------------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  group_instance_id: str | None) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if (code := self.coordinator_error(group_id)) is not None:
            return code
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        fenced = self._fenced(group, member_id, group_instance_id)
        if fenced is not None:
            return fenced
        member = group.members.get(member_id)
        if member is None or group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        member.heartbeat_deadline_ms = self.clock() + member.session_timeout_ms
        if group.is_(S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, one error per (member id, instance id) leaving)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, [ErrorCode.INVALID_GROUP_ID] * len(leaving)
        if (code := self.coordinator_error(group_id)) is not None:
            return code, [code] * len(leaving)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(S.DEAD):
            return (ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(leaving))
        errors = []
        for member_id, instance_id in leaving:
            if instance_id is not None:
                known = group.static.get(instance_id)
                if known is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            if member_id in group.pending:
                del group.pending[member_id]
                self._maybe_complete_join(group)
                errors.append(ErrorCode.NONE)
                continue
            if member_id not in group.members:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self._member_gone(group, member_id, "left the group")
            errors.append(ErrorCode.NONE)
        return ErrorCode.NONE, errors

    def _member_gone(self, group: Group, member_id: str, reason: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        log.info("group %s: member %s %s", group.group_id, member_id, reason)
        member.finish_join(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        member.finish_sync(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member_id} {reason}")
        self._maybe_complete_join(group)

    def _expire_pending(self, group: Group, now: float) -> None:
        expired = [m for m, deadline in group.pending.items() if now >= deadline]
        for member_id in expired:
            del group.pending[member_id]
        if expired:
            self._maybe_complete_join(group)

    def _enforce_deadlines(self, group: Group, now: float) -> None:
        """Whatever deadline of a classic group has passed takes effect now."""
        self._expire_pending(group, now)
        self._expire_members(group, now)
        if group.is_(S.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        elif group.is_(S.COMPLETING_REBALANCE) and now >= group.sync_deadline_ms:
            self._sync_timed_out(group)

    def catch_up(self) -> None:
        """Apply the deadlines that passed since the last tick before a request reads
        or changes the groups' membership (DescribeGroups, ListGroups, DeleteGroups):
        Kafka's timers fire on time, so a member whose session ended a moment ago is
        gone, not waiting for the next tick."""
        try:
            self.tick()
        except Exception:
            log.exception("group coordinator tick failed")

    def _expire_members(self, group: Group, now: float) -> None:
        for member in list(group.members.values()):
            if member.awaiting_join or member.sync_waiter is not None:
                continue  # bounded by the rebalance / sync deadlines instead
            if now >= member.heartbeat_deadline_ms:
                self._member_gone(group, member.member_id,
                                  f"expired (no heartbeat in {member.session_timeout_ms} ms)")

    def _fenced(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """FENCED_INSTANCE_ID when a static member's id was taken over by a newer one."""
        if instance_id is None:
            return None
        known = group.static.get(instance_id)
        if known is None:
            return ErrorCode.UNKNOWN_MEMBER_ID if member_id not in group.members else None
        if known != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        return None

    # --- offsets ---------------------------------------------------------------------
    def commit_offsets(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
        topics: list[tuple[str, list[tuple[int, int, int, str | None]]]],
    ) -> list[tuple[str, list[tuple[int, ErrorCode]]]]:
        """topics: (name, [(partition, offset, leader_epoch, metadata)]) -> per-partition
        codes, taken as stored at once: for stores that do not replicate. The broker
        uses begin_commit / finish_commit, waiting for the ISR in between."""
        pending = self.begin_commit(group_id, generation, member_id, group_instance_id, topics)
        return self.finish_commit(pending, ErrorCode.NONE)

    def begin_commit(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
        topics: list[tuple[str, list[tuple[int, int, int, str | None]]]],
    ) -> PendingCommit:
        """Validate a commit and append its records (with acks=all's ISR check). The
        offsets become the group's only in finish_commit, once the append is known to
        be committed (Kafka's pending offset commits): a commit the ISR never got is
        neither acknowledged nor visible to OffsetFetch."""
        error = self._commit_error(group_id, generation, member_id, group_instance_id)
        if error is not None:
            return PendingCommit(group_id, [(name, [(p[0], error) for p in parts])
                                            for name, parts in topics])
        results, records, accepted = self._offset_records(group_id, topics)
        pending = PendingCommit(group_id, results, accepted)
        if records:
            try:
                pending.appended = self.store.append(group_id, records, required_acks=-1)
            except KafkaError as exc:
                log.info("group %s: storing offsets failed: %s", group_id, exc)
                pending.failed = exc.code
            except Exception:
                log.exception("group %s: storing offsets failed" + STORE, group_id)
                pending.failed = ErrorCode.COORDINATOR_NOT_AVAILABLE
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None:
            member.heartbeat_deadline_ms = self.clock() + member.session_timeout_ms
        return pending

    def _offset_records(
        self, group_id: str, topics: list[tuple[str, list[tuple[int, int, int, str | None]]]],
    ) -> tuple[list[tuple[str, list[tuple[int, ErrorCode]]]], list[rec.Record],
               list[tuple[tuple[str, int], OffsetEntry]]]:
        """Per-partition checks of an (Txn)OffsetCommit: the answer codes, the records
        to append and the entries they carry, for the partitions that passed."""
        now = self.wall()
        results: list[tuple[str, list[tuple[int, ErrorCode]]]] = []
        records: list[rec.Record] = []
        accepted: list[tuple[tuple[str, int], OffsetEntry]] = []
        for name, parts in topics:
            codes = []
            for partition, offset, epoch, metadata in parts:
                if not self.partition_exists(name, partition):
                    codes.append((partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                meta = metadata or ""
                if len(meta.encode()) > self.config.offset_metadata_max_bytes:
                    codes.append((partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                records.append((rec.offset_key(group_id, name, partition),
                                rec.offset_value(rec.OffsetValue(offset, epoch, meta, now))))
                accepted.append(((name, partition), OffsetEntry(offset, epoch, meta, now)))
                codes.append((partition, ErrorCode.NONE))
            results.append((name, codes))
        return results, records, accepted

    def finish_commit(self, pending: PendingCommit, stored: ErrorCode
                      ) -> list[tuple[str, list[tuple[int, ErrorCode]]]]:
        """The append of `pending` is committed (`stored` NONE) or failed with
        `stored`: apply its offsets, or answer every accepted partition with the
        error a client gets (Kafka's GroupMetadataManager.storeOffsets mapping)."""
        code = pending.failed if pending.failed is not None else stored
        if code == ErrorCode.NONE:
            if pending.entries:
                group = self.groups.get(pending.group_id)
                if group is None:
                    group = self.groups[pending.group_id] = Group(pending.group_id, self.wall())
                for key, entry in pending.entries:
                    group.offsets[key] = entry
            return pending.results
        return _failed_commit_answers(pending, code)

    # --- transactional offsets (TxnOffsetCommit) --------------------------------------
    def begin_txn_commit(
        self, group_id: str, producer_id: int, producer_epoch: int, generation: int,
        member_id: str, group_instance_id: str | None,
        topics: list[tuple[str, list[tuple[int, int, int, str | None]]]],
    ) -> PendingCommit:
        """Validate a TxnOffsetCommit and append its records as the producer's
        transactional batch; finish_txn_commit keeps them pending until the marker."""
        error = self._txn_commit_error(group_id, generation, member_id, group_instance_id)
        if error is None:
            error = _txn_producer_error(producer_id, producer_epoch)
        if error is not None:
            return PendingCommit(group_id, [(name, [(p[0], error) for p in parts])
                                            for name, parts in topics])
        results, records, accepted = self._offset_records(group_id, topics)
        pending = PendingCommit(group_id, results, accepted, producer_id=producer_id)
        if records:
            producer = self.txn_offsets.producer(self.store.partition_of(group_id), producer_id,
                                                 producer_epoch, len(records))
            try:
                pending.appended = self.store.append(group_id, records, required_acks=-1,
                                                     producer=producer)
            except KafkaError as exc:
                log.info("group %s: storing transactional offsets failed: %s", group_id, exc)
                pending.failed = exc.code
            except TXN_APPEND_ERRORS as exc:
                # the log's producer state refused the batch (an older epoch, a
                # transaction state it does not allow): the client's error, not ours
                log.info("group %s: storing transactional offsets failed: %s", group_id, exc)
                pending.failed = next(c for t, c in TXN_APPEND_ERROR_CODES if isinstance(exc, t))
            except Exception:
                log.exception("group %s: storing transactional offsets failed" + STORE,
                              group_id)
                pending.failed = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if pending.failed is not None:
                # the batch was not written: the next one reuses its sequences
                self.txn_offsets.unsend(self.store.partition_of(group_id), producer)
        return pending

    def finish_txn_commit(self, pending: PendingCommit, stored: ErrorCode
                          ) -> list[tuple[str, list[tuple[int, ErrorCode]]]]:
        code = pending.failed if pending.failed is not None else stored
        if code == ErrorCode.NONE:
            if pending.entries:
                self.txn_offsets.add(pending.producer_id, pending.group_id, pending.entries)
            return pending.results
        return _failed_commit_answers(pending, code)

    def _txn_commit_error(self, group_id: str, generation: int, member_id: str,
                          group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateOffsetCommit for a transactional commit: a group member's
        commit (v3 with generation/member) is checked, a bare one is not."""
        if (code := self.coordinator_error(group_id)) is not None:
            return code
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and not member_id and group_instance_id is None:
            return None
        return self._member_error(group, generation, member_id, group_instance_id)

    def on_txn_marker(self, topic: str, partition: int, producer_id: int,
                      producer_epoch: int, commit: bool, marker_offset: int) -> None:
        """A transaction marker was written to an offsets partition led here."""
        if topic != OFFSETS_TOPIC:
            return
        try:
            self._apply_txn_marker(partition, producer_id, commit)
        except Exception:
            # the marker is in the log but not in the groups: serving them on would hand
            # out the offsets from before it (or keep them unstable for good), so the
            # partition's groups are loaded again from the log, marker included
            log.exception("applying the transaction marker of producer %d to offsets "
                          "partition %d failed; loading the partition's groups again from "
                          "its log (%s)", producer_id, partition, BUG_REPORT)
            self._reload_partition(partition)

    def _reload_partition(self, index: int) -> None:
        """Forget offsets partition `index`'s groups and load them again from its log (as
        after a leader change: members find the coordinator again)."""
        owned = self.owned
        self.partition_lost(index)
        if owned is None:  # a broker that coordinates every group (no ownership kept)
            self.owned = None
            self.load(index)
        else:
            self.partition_led(index)

    def _apply_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        pending = self.txn_offsets.pending.get(producer_id, {})
        groups = {g for g in pending if self.store.partition_of(g) == partition}
        for group_id, entries in self.txn_offsets.complete(producer_id, groups).items():
            if not commit:
                continue
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = Group(group_id, self.wall())
            group.offsets.update(entries)

    def unstable_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """A transactional commit of this partition waits for its marker."""
        return self.txn_offsets.is_pending(group_id, (topic, partition))

    def _member_error(self, group: Group, generation: int, member_id: str,
                      group_instance_id: str | None) -> ErrorCode | None:
        """The member's own checks, in Kafka's order: a fenced static instance, an
        unknown member, then an old generation."""
        fenced = self._fenced(group, member_id, group_instance_id)
        if fenced is not None:
            return fenced
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def _commit_error(self, group_id: str, generation: int, member_id: str,
                      group_instance_id: str | None) -> ErrorCode | None:
        if (code := self.coordinator_error(group_id)) is not None:
            return code
        group = self.groups.get(group_id)
        if group is None:
            # Kafka: only standalone commits may create a group
            return None if generation < 0 else ErrorCode.ILLEGAL_GENERATION
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:
            return self.consumer.commit_error(group.consumer, generation, member_id)
        if generation < 0 and group.is_(S.EMPTY):
            return None  # a standalone (admin / manual assignment) commit
        if generation >= 0 or member_id or group_instance_id is not None:
            # Kafka's ClassicGroup.validateOffsetCommit: the member and its generation
            # come first, so a member still on an old generation gets ILLEGAL_GENERATION
            # (and rejoins) even while the group completes a rebalance
            if (code := self._member_error(group, generation, member_id,
                                           group_instance_id)) is not None:
                return code
        elif not group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None
                      ) -> list[tuple[str, list[tuple[int, OffsetEntry | None]]]]:
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if topics is None:
            by_topic: dict[str, list[tuple[int, OffsetEntry | None]]] = {}
            for (topic, partition), entry in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append((partition, entry))
            return list(by_topic.items())
        return [(name, [(p, offsets.get((name, p))) for p in parts]) for name, parts in topics]

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]
                       ) -> tuple[int, list[tuple[str, list[tuple[int, int]]]]]:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        if (code := self.coordinator_error(group_id)) is not None:
            return code, []
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        codes: list[tuple[int, int]]
        subscribed = self._subscribed_topics(group)
        results = []
        records: list[rec.Record] = []
        doomed = []
        for name, parts in topics:
            codes = []
            for partition in parts:
                if name in subscribed:
                    codes.append((partition, GROUP_SUBSCRIBED_TO_TOPIC))
                elif not self.partition_exists(name, partition):
                    codes.append((partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                else:
                    codes.append((partition, ErrorCode.NONE))
                    if (name, partition) in group.offsets:
                        records.append((rec.offset_key(group_id, name, partition), None))
                        doomed.append((name, partition))
            results.append((name, codes))
        self.store.append(group_id, records)
        for key in doomed:
            group.offsets.pop(key, None)
        return ErrorCode.NONE, results

    def _subscribed_topics(self, group: Group) -> set[str]:
        """Topics the members of a consumer group subscribe to (empty if unknown)."""
        if group.consumer is not None:
            return set(group.consumer.subscription_metadata)
        if not group.members or group.protocol_type != "consumer":
            return set()
        topics: set[str] = set()
        for member in group.members.values():
            topics |= consumer_subscription(member.metadata(group.protocol))
        return topics

    def expire_offsets(self) -> int:
        """Tombstone the offsets of empty groups older than offsets.retention.minutes;
        an empty group left with no offsets is deleted. Returns offsets expired."""
        now = self.wall()
        retention = self.config.offsets_retention_ms
        expired_count = 0
        for group in list(self.groups.values()):
            if not group.is_(S.EMPTY) or (group.consumer is not None and group.consumer.members):
                continue
            # Kafka counts retention from when the group became empty
            expired = [k for k, e in group.offsets.items()
                       if max(e.commit_timestamp_ms, group.state_timestamp_ms) + retention <= now]
            records: list[rec.Record] = [(rec.offset_key(group.group_id, t, p), None)
                                         for t, p in expired]
            dead = len(expired) == len(group.offsets)
            if dead:
                records.append((rec.group_key(group.group_id), None))
                records += self.consumer.tombstones(group)
            if not expired and not dead:
                continue
            try:
                self.store.append(group.group_id, records)
            except Exception:
                log.exception("group %s: expiring offsets failed", group.group_id)
                continue
            for key in expired:
                del group.offsets[key]
            expired_count += len(expired)
            if dead:
                group.state = S.DEAD
                del self.groups[group.group_id]
            log.info("group %s: expired %d offsets%s", group.group_id, len(expired),
                     " and removed the group" if dead else "")
        return expired_count

    # --- admin -----------------------------------------------------------------------
    def list_groups(self) -> list[Group]:
        self.catch_up()
        return [g for g in self.groups.values() if not g.is_(S.DEAD)]

    def describe_group(self, group_id: str) -> Group | None:
        self.catch_up()
        group = self.groups.get(group_id)
        # DescribeGroups shows a consumer group as Dead, as Kafka does
        return None if group is None or group.is_(S.DEAD) or group.consumer is not None \
            else group

    def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, ErrorCode]]:
        self.catch_up()
        results = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if not group_id:
                results.append((group_id, ErrorCode.INVALID_GROUP_ID))
            elif (code := self.coordinator_error(group_id)) is not None:
                results.append((group_id, code))
            elif group is None or group.is_(S.DEAD):
                results.append((group_id, ErrorCode.GROUP_ID_NOT_FOUND))
            elif not group.is_(S.EMPTY) or (group.consumer is not None
                                            and group.consumer.members):
                results.append((group_id, ErrorCode.NON_EMPTY_GROUP))
            else:
                records: list[rec.Record] = [(rec.offset_key(group_id, t, p), None)
                                             for t, p in group.offsets]
                records.append((rec.group_key(group_id), None))
                records += self.consumer.tombstones(group)
                try:
                    self.store.append(group_id, records)
                except Exception:
                    log.exception("group %s: deleting failed" + STORE, group_id)
                    results.append((group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
                    continue
                group.state = S.DEAD
                del self.groups[group_id]
                log.info("group %s: deleted", group_id)
                results.append((group_id, ErrorCode.NONE))
        return results

    # --- persistence -----------------------------------------------------------------
    def _persist_group(self, group: Group) -> None:
        value = rec.GroupValue(
            protocol_type=group.protocol_type or "", generation=group.generation,
            protocol=group.protocol, leader=group.leader,
            current_state_timestamp=group.state_timestamp_ms,
            members=[rec.MemberValue(m.member_id, m.group_instance_id, m.client_id,
                                     m.client_host, m.rebalance_timeout_ms, m.session_timeout_ms,
                                     m.metadata(group.protocol), m.assignment)
                     for m in group.members.values()])
        self.store.append(group.group_id, [(rec.group_key(group.group_id),
                                            rec.group_value(value))])

    def _persist_group_quietly(self, group: Group) -> None:
        try:
            self._persist_group(group)
        except Exception:
            log.exception("group %s: storing group metadata failed" + STORE,
                          group.group_id)


@dataclasses.dataclass
class PendingCommit:
    """An offset commit between its append and its answer."""

    group_id: str
    results: list[tuple[str, list[tuple[int, ErrorCode]]]]
    #: the offsets to apply once the append is committed
    entries: list[tuple[tuple[str, int], OffsetEntry]] = dataclasses.field(default_factory=list)
    #: what to wait for; None when nothing was appended or the store does not replicate
    appended: Appended | None = None
    #: the append itself failed
    failed: ErrorCode | None = None
    #: a TxnOffsetCommit's producer id
    producer_id: int = -1


def _txn_producer_error(producer_id: int, producer_epoch: int) -> ErrorCode | None:
    """A TxnOffsetCommit's producer must be one a transaction coordinator handed out
    (InitProducerId: id and epoch >= 0); a transactional batch cannot carry anything
    else, so a stray or corrupt one is refused here rather than by the log: no such
    id maps to a transaction (INVALID_PRODUCER_ID_MAPPING), no such epoch is current
    (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED for v3+ clients)."""
    if producer_id < 0:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch < 0:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return None


def commit_error(code: ErrorCode) -> ErrorCode:
    """The OffsetCommit error for a failed append to the offsets partition (Kafka's
    GroupMetadataManager.storeOffsets): the client retries, or finds the coordinator
    again, rather than learning of replication."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code


def join_error(code: ErrorCode, member_id: str = "") -> Body:
    return {"throttle_time_ms": 0, "error_code": int(code), "generation_id": -1,
            "protocol_name": "", "leader": "", "member_id": member_id, "members": []}


def sync_error(code: ErrorCode) -> Body:
    return {"throttle_time_ms": 0, "error_code": int(code), "assignment": b""}


def sync_ok(assignment: bytes) -> Body:
    return {"throttle_time_ms": 0, "error_code": 0, "assignment": assignment}


def consumer_subscription(metadata: bytes) -> set[str]:
    """Topic names in a consumer protocol subscription (version i16, [string])."""
    try:
        r = rec._Reader(metadata)
        r.take(">h")
        return {r.string() or "" for _ in range(max(r.take(">i"), 0))}
    except Exception:
        return set()


def _failed_commit_answers(pending: PendingCommit, code: ErrorCode
                           ) -> list[tuple[str, list[tuple[int, ErrorCode]]]]:
    """A commit whose append failed with `code`: every accepted partition gets the
    error a client sees (Kafka's GroupMetadataManager.storeOffsets mapping)."""
    answer = commit_error(code)
    return [(name, [(p, answer if c == ErrorCode.NONE else c) for p, c in codes])
            for name, codes in pending.results]
