"""Topics and partition states on ZooKeeper: the ZooKeeperBackend's half that deals with
/brokers/topics, /config/topics, /config/changes and /admin/delete_topics.

A mixin of ZooKeeperBackend (zookeeper.py), which provides the client, the fenced
multis (`_multi` / `_commit`) and watch registration; split out only to keep each
module small. Kafka's counterparts: AdminZkClient (create, configs, deletion request),
KafkaZkClient's topic and partition-state methods, TopicDeletionManager (delete)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.protocol.states import ZnodeStat

from pybroker.coordination import znodes as zn
from pybroker.coordination.base import (
    ControllerLease,
    StateOutcome,
    StateUpdate,
    TopicAssignment,
    VersionedState,
    validate_assignment,
    validate_topic_name,
)
from pybroker.coordination.errors import (
    ControllerMoved,
    CoordinationUnavailable,
    StaleVersion,
)
from pybroker.coordination.watches import (
    Callback,
    Dispatcher,
    StateBatches,
    WatchHandle,
    invoke,
)
from pybroker.coordination.zkconfigs import RACE_RETRIES_MAX, write_config_znode
from pybroker.coordination.zkmultiread import get_many
from pybroker.coordination.zkclient import (
    AsyncKazoo,
    commit,
    fenced_multi,
    first_error,
    kazoo_errors_translated,
)
from pybroker.coordination.zkpersistent import EventTap
from pybroker.coordination.zkstatemulti import StateMulti
from pybroker.coordination.zkstatewatch import RecursiveStatesWatch
from pybroker.coordination.zkwatches import (
    ChildrenDataWatch,
    PartitionStatesWatch,
    ZkWatch,
    read_many,
)
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.errors import ErrorCode, KafkaError
from pybroker.server.loop_slice import LoopSlice

log = logging.getLogger(__name__)

#: operations per ZooKeeper multi: stays well under jute.maxbuffer (1 MiB) with Kafka's
#: payload sizes
OPS_PER_MULTI = 500
#: a batch of partition-state writes (update_partition_states): operations and bytes
#: per multi. ZooKeeper refuses a request over jute.maxbuffer (1 MiB by default) by
#: dropping the connection; half of it leaves room for a lowered setting's margin
STATE_OPS_PER_MULTI = 1000
STATE_BYTES_PER_MULTI = 512 * 1024
#: a failed batch's other writes go again in batches this many times, then one by one
STATE_BATCH_RETRIES = 2
#: a set_data operation's bytes besides its path and data (headers, lengths, version)
OP_OVERHEAD_BYTES = 32
#: Kafka purges config change notifications older than this (changeExpirationMs)
CONFIG_CHANGE_EXPIRY_MS = 15 * 60 * 1000
#: the zero Uuid: stands for a topic id missing in a topic znode Kafka < 2.8 wrote
ZERO_UUID = uuid.UUID(int=0)


def unknown_topic(name: str) -> KafkaError:
    return KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' not found.")


def _decode_assignment(name: str, path: str, data: bytes | None) -> TopicAssignment:
    raw = zn.decode(path, data, zn.TopicZNode)
    topic_id = ZERO_UUID
    if isinstance(raw.topic_id, str):
        try:
            topic_id = zn.parse_kafka_uuid(raw.topic_id)
        except ValueError as exc:
            raise zn.MalformedZNode(path, data, str(exc)) from None
    return TopicAssignment(name=name, topic_id=topic_id, partitions=raw.partitions,
                           adding_replicas=raw.adding_replicas,
                           removing_replicas=raw.removing_replicas)


def _encode_assignment(assignment: TopicAssignment) -> bytes:
    return zn.encode(zn.TopicZNode(
        partitions=assignment.partitions, topic_id=zn.kafka_uuid(assignment.topic_id),
        adding_replicas=assignment.adding_replicas,
        removing_replicas=assignment.removing_replicas))


_StateWrite = tuple[StateUpdate, str, bytes]


def _state_batches(writes: list[_StateWrite]) -> list[list[_StateWrite]]:
    """Cut state writes into multis of at most STATE_OPS_PER_MULTI operations and
    STATE_BYTES_PER_MULTI bytes (a state bigger than that still goes, alone)."""
    batches: list[list[_StateWrite]] = []
    current: list[_StateWrite] = []
    size = 0
    for write in writes:
        cost = len(write[1]) + len(write[2]) + OP_OVERHEAD_BYTES
        if current and (len(current) >= STATE_OPS_PER_MULTI
                        or size + cost > STATE_BYTES_PER_MULTI):
            batches.append(current)
            current, size = [], 0
        current.append(write)
        size += cost
    if current:
        batches.append(current)
    return batches


def _seq(name: str, prefix: str) -> int:
    """The sequence number of a sequential znode's name (-1 for a foreign name)."""
    tail = name[len(prefix):] if name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else -1


@kazoo_errors_translated
class TopicOps:
    """Topic and partition-state operations of ZooKeeperBackend (see the module doc)."""

    zk: AsyncKazoo
    _dispatcher: Dispatcher

    async def _add_watch(self, watch: ZkWatch) -> WatchHandle:
        raise NotImplementedError  # ZooKeeperBackend's

    # --- topics ---
    async def topic_assignments(self) -> dict[str, TopicAssignment]:
        names = await self.zk.call("get_children", zn.TOPICS)
        paths = [zn.topic_path(n) for n in names]
        reads = await read_many(self.zk, paths, [None] * len(paths))
        return {name: _decode_assignment(name, path, read[0])
                for name, path, read in zip(names, paths, reads, strict=True) if read is not None}

    async def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str],
                           lease: ControllerLease | None) -> None:
        name = assignment.name
        validate_topic_name(name)
        validate_assignment(assignment.partitions)
        if await self.zk.call("exists", zn.delete_topic_path(name)):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"Topic '{name}' is marked for deletion.")
        config_data = zn.encode(zn.TopicConfigZNode(config=dict(configs)))
        config_exists = await self.zk.call("exists", zn.topic_config_path(name)) is not None
        for _ in range(RACE_RETRIES_MAX):
            # Kafka writes the configs first, so a broker seeing the topic sees its configs
            txn = fenced_multi(self.zk, lease)
            if config_exists:
                txn.set_data(zn.topic_config_path(name), config_data)
            else:
                txn.create(zn.topic_config_path(name), config_data)
            txn.create(zn.topic_path(name), _encode_assignment(assignment))
            failed = first_error(await commit(self.zk, txn, lease))
            if failed is None:
                return
            index, error = failed
            if index == 1 and isinstance(error, NodeExistsError):
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS,
                                 f"Topic '{name}' already exists.")
            if index == 0 and isinstance(error, (NodeExistsError, NoNodeError)):
                config_exists = not config_exists  # a stale config znode came or went
                continue
            raise error
        raise CoordinationUnavailable(f"creating topic {name} kept racing")

    async def set_partition_assignment(self, assignment: TopicAssignment,
                                       lease: ControllerLease | None) -> None:
        name = assignment.name
        validate_assignment(assignment.partitions)
        path = zn.topic_path(name)
        for _ in range(RACE_RETRIES_MAX):
            try:
                data, stat = await self.zk.call("get", path)
            except NoNodeError:
                raise unknown_topic(name) from None
            current = _decode_assignment(name, path, data)
            # a topic without an id (written by Kafka < 2.8) may be given one
            if current.topic_id != assignment.topic_id and current.topic_id != ZERO_UUID:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Topic '{name}' has another topic id now.")
            if len(assignment.partitions) < len(current.partitions):
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic '{name}' cannot lose partitions.")
            txn = fenced_multi(self.zk, lease)
            txn.set_data(path, _encode_assignment(assignment), stat.version)
            failed = first_error(await commit(self.zk, txn, lease))
            if failed is None:
                return
            if isinstance(failed[1], NoNodeError):
                raise unknown_topic(name)
            if not isinstance(failed[1], BadVersionError):
                raise failed[1]
        raise CoordinationUnavailable(f"updating the assignment of {name} kept racing")

    async def watch_topics(self, callback: Callback) -> WatchHandle:
        def decode(path: str, data: bytes | None, stat: ZnodeStat) -> TopicAssignment:
            return _decode_assignment(path.rsplit("/", 1)[1], path, data)

        async def on_set(values: dict[str, tuple[TopicAssignment | None, int]]) -> None:
            await invoke(callback, {k: v for k, (v, _) in values.items() if v is not None})

        # a topic znode that cannot be read is not a deleted topic: the brokers would
        # delete its logs (a topic is deleted when its znode is gone)
        return await self._add_watch(ChildrenDataWatch(
            self.zk, self._dispatcher, zn.TOPICS, data_path=zn.topic_path, decode=decode,
            on_set=on_set, malformed_keeps_last=True))

    async def topic_configs(self, name: str) -> dict[str, str]:
        path = zn.topic_config_path(name)
        try:
            data, _ = await self.zk.call("get", path)
        except NoNodeError:
            return {}
        return zn.decode(path, data, zn.TopicConfigZNode).config

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Kafka's AdminZkClient.changeTopicConfig: the configs, then a change notification
        (here in one multi, with a check that the topic exists)."""
        await write_config_znode(self.zk, zn.topic_config_path(name), configs,
                                 f"topics/{name}", must_exist=zn.topic_path(name),
                                 missing=lambda: unknown_topic(name))

    async def watch_topic_configs(self, callback: Callback) -> WatchHandle:
        """Kafka's ZkNodeChangeNotificationListener: notifications newer than the newest
        at registration; those older than 15 minutes are purged on the way."""
        prefix = zn.CONFIG_CHANGE_PREFIX
        last_seen: list[int | None] = [None]

        async def on_set(values: dict[str, tuple[None, int]]) -> None:
            numbered = sorted((_seq(c, prefix), c) for c in values if _seq(c, prefix) >= 0)
            if last_seen[0] is None:  # the first listing: only remember where we are
                last_seen[0] = numbered[-1][0] if numbered else -1
                return
            new = [(s, c) for s, c in numbered if s > last_seen[0]]
            paths = [f"{zn.CONFIG_CHANGES}/{c}" for _, c in new]
            reads = await read_many(self.zk, paths, [None] * len(paths))
            for (seq, _), path, read in zip(new, paths, reads, strict=True):
                last_seen[0] = seq
                if read is None:
                    continue
                try:
                    entity = zn.decode(path, read[0], zn.ConfigChangeNotification).entity_path
                except zn.MalformedZNode as exc:
                    log.error("%s: the config change it announces is skipped; correct or "
                              "delete that znode (zkCli.sh)", exc)
                    continue
                kind, _, topic = entity.partition("/")
                if kind == "topics" and topic:
                    await invoke(callback, topic, await self.topic_configs(topic))
            await self._purge_config_changes([c for s, c in numbered if s <= last_seen[0]])

        return await self._add_watch(ChildrenDataWatch(self.zk, self._dispatcher, zn.CONFIG_CHANGES,
                                                       on_set=on_set))

    async def _purge_config_changes(self, seen: list[str]) -> None:
        paths = [f"{zn.CONFIG_CHANGES}/{c}" for c in seen]
        reads = await read_many(self.zk, paths, [None] * len(paths))
        now_ms = int(zn.now_ms_text())
        for path, read in zip(paths, reads, strict=True):
            if read is not None and now_ms - read[1].ctime > CONFIG_CHANGE_EXPIRY_MS:
                try:
                    await self.zk.call("delete", path)
                except NoNodeError:  # another broker purged it first
                    pass

    async def request_topic_deletion(self, name: str) -> None:
        txn = self.zk.kazoo.transaction()
        txn.check(zn.topic_path(name), -1)
        txn.create(zn.delete_topic_path(name))
        failed = first_error(await self.zk.commit(txn))
        if failed is None or isinstance(failed[1], NodeExistsError):
            return  # already marked: Kafka ignores a second request
        if failed[0] == 0:
            raise unknown_topic(name)
        raise failed[1]

    async def topics_pending_deletion(self) -> set[str]:
        return set(await self.zk.call("get_children", zn.DELETE_TOPICS))

    async def watch_topic_deletions(self, callback: Callback) -> WatchHandle:
        async def on_set(values: dict[str, Any]) -> None:
            await invoke(callback, set(values))

        return await self._add_watch(ChildrenDataWatch(self.zk, self._dispatcher,
                                                       zn.DELETE_TOPICS, on_set=on_set))

    async def delete_topic(self, name: str, lease: ControllerLease) -> None:
        """Kafka's TopicDeletionManager completing: the topic's znodes (leaves first),
        then its configs and its deletion mark; every multi fenced. A topic whose znodes
        are gone already only has its leftovers removed (and is UNKNOWN_TOPIC...)."""
        for _ in range(RACE_RETRIES_MAX):
            exists = await self.zk.call("exists", zn.topic_path(name)) is not None
            try:
                if exists:
                    await self._delete_in_multis(await self._subtree(zn.topic_path(name)),
                                                 lease)
                for leftover in (zn.topic_config_path(name), zn.delete_topic_path(name)):
                    await self._delete_in_multis([leftover], lease, missing_ok=True)
            except (NotEmptyError, NoNodeError):
                continue  # the tree changed under us: list it again
            if not exists:
                raise unknown_topic(name)
            return
        raise CoordinationUnavailable(f"deleting topic {name} kept racing")

    async def _subtree(self, root: str) -> list[str]:
        """`root` and everything under it, deepest first (the order to delete in)."""
        levels = [[root]]
        while levels[-1]:
            level = levels[-1]
            pending = [self.zk.kazoo.get_children_async(p) for p in level]
            below: list[str] = []
            for parent, result in zip(level, pending, strict=True):
                try:
                    children = await self.zk.wait(result)
                except NoNodeError:
                    continue
                below.extend(f"{parent}/{c}" for c in children)
            levels.append(below)
        return [p for level in reversed(levels) for p in level]

    async def _delete_in_multis(self, paths: list[str], lease: ControllerLease,
                                missing_ok: bool = False) -> None:
        for start in range(0, len(paths), OPS_PER_MULTI):
            txn = fenced_multi(self.zk, lease)
            for path in paths[start:start + OPS_PER_MULTI]:
                txn.delete(path)
            failed = first_error(await commit(self.zk, txn, lease))
            if failed is not None and not (missing_ok and isinstance(failed[1], NoNodeError)):
                raise failed[1]

    # --- partition state ---
    async def partition_states(self, topic: str) -> dict[int, VersionedState]:
        try:
            children = await self.zk.call("get_children", zn.partitions_path(topic))
        except NoNodeError:
            return {}
        partitions = sorted(int(c) for c in children if c.isdigit())
        paths = [zn.partition_state_path(topic, p) for p in partitions]
        reads = await read_many(self.zk, paths, [None] * len(paths))
        return {p: VersionedState(zn.decode(path, read[0], LeaderAndIsr), read[1].version)
                for p, path, read in zip(partitions, paths, reads, strict=True)
                if read is not None}

    async def create_partition_states(self, topic: str, states: Mapping[int, LeaderAndIsr],
                                      lease: ControllerLease) -> dict[int, int]:
        path = zn.topic_path(topic)
        try:
            data, _ = await self.zk.call("get", path)
        except NoNodeError:
            raise unknown_topic(topic) from None
        assigned = _decode_assignment(topic, path, data).partitions
        for partition in states:
            if partition not in assigned:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Topic '{topic}' has no partition {partition}.")
        try:
            existing = set(await self.zk.call("get_children", zn.partitions_path(topic)))
            parent_exists = True
        except NoNodeError:
            existing, parent_exists = set(), False
        todo = sorted(states)
        per_multi = OPS_PER_MULTI // 2
        for start in range(0, len(todo), per_multi):
            txn = fenced_multi(self.zk, lease)
            if not parent_exists:
                txn.create(zn.partitions_path(topic))
                parent_exists = True
            chunk = todo[start:start + per_multi]
            for partition in chunk:
                if str(partition) not in existing:
                    txn.create(zn.partition_path(topic, partition))
                txn.create(zn.partition_state_path(topic, partition),
                           zn.encode(states[partition]))
            failed = first_error(await commit(self.zk, txn, lease))
            if failed is not None:
                index, error = failed
                op = txn.operations[index + (1 if lease is not None else 0)]
                if isinstance(error, NodeExistsError) and op.path.endswith("/state"):
                    raise StaleVersion(op.path, -1)
                if isinstance(error, NoNodeError):
                    raise unknown_topic(topic)
                raise error
        return dict.fromkeys(states, 0)

    async def update_partition_state(self, topic: str, partition: int, state: LeaderAndIsr,
                                     expected_version: int,
                                     lease: ControllerLease | None) -> int:
        path = zn.partition_state_path(topic, partition)
        txn = fenced_multi(self.zk, lease)
        txn.set_data(path, zn.encode(state), expected_version)
        results = await commit(self.zk, txn, lease)
        result = results[0]
        if isinstance(result, BadVersionError):
            raise StaleVersion(path, expected_version)
        if isinstance(result, NoNodeError):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"No state for partition {topic}-{partition}.")
        if isinstance(result, Exception):
            raise result
        return result.version

    async def partition_states_of(self, partitions: Iterable[tuple[str, int]]
                                  ) -> dict[tuple[str, int], VersionedState]:
        keys = list(dict.fromkeys(partitions))
        paths = [zn.partition_state_path(t, p) for t, p in keys]
        reads = await get_many(self.zk, paths)
        # JSON decoded on the loop, thousands at a time (a new controller's first pass,
        # a controlled shutdown): the loop gets turns meanwhile (issue 25)
        pace = LoopSlice()
        states: dict[tuple[str, int], VersionedState] = {}
        for key, path, read in zip(keys, paths, reads, strict=True):
            if read is not None:
                await pace.pause_if_due()
                states[key] = VersionedState(zn.decode(path, read[0], LeaderAndIsr),
                                             read[1].version)
        return states

    async def update_partition_states(self, updates: Sequence[StateUpdate],
                                      lease: ControllerLease | None
                                      ) -> dict[tuple[str, int], StateOutcome]:
        """See CoordinationBackend. A multi fails as a whole when one partition's version
        moved on: that partition is StaleVersion, and the batch's other partitions are
        written again one multi each (still conditional and fenced), so one lost race
        never costs the others their update."""
        pace = LoopSlice()  # thousands of states encoded: the loop gets turns (issue 25)
        writes: list[_StateWrite] = []
        for u in updates:
            await pace.pause_if_due()
            writes.append((u, zn.partition_state_path(u.topic, u.partition), zn.encode(u.state)))
        outcomes: dict[tuple[str, int], StateOutcome] = {}
        retry = await self._commit_state_batches(_state_batches(writes), lease, outcomes)
        for _ in range(STATE_BATCH_RETRIES):
            if not retry:
                break
            retry = await self._commit_state_batches(_state_batches(retry), lease, outcomes)
        if retry:  # races keep failing batches: one multi each, so each fails alone
            await self._commit_state_batches([[w] for w in retry], lease, outcomes)
        return outcomes

    async def _commit_state_batches(self, batches: list[list[_StateWrite]],
                                    lease: ControllerLease | None,
                                    outcomes: dict[tuple[str, int], StateOutcome]
                                    ) -> list[_StateWrite]:
        """Send every batch as one multi before awaiting any answer; record each
        partition's outcome; return the writes of failed multis that were not the
        failure's cause (to be tried again)."""
        pending = []
        kazoo = self.zk.kazoo
        chroot = kazoo.chroot or ""
        # the fence as fenced_multi's (Kafka's checkControllerEpoch), then the writes, in
        # a multi coded for this shape (zkstatemulti.py: kazoo's generic one cost most
        # of a 30,000-state batch's time on its connection thread). These paths are
        # built by znodes.py, absolute and normal already
        fence = None if lease is None else (chroot + zn.CONTROLLER_EPOCH,
                                            lease.epoch_zk_version)
        for batch in batches:
            result = kazoo.handler.async_result()
            kazoo._call(StateMulti(fence, [(chroot + path, data, update.expected_version)
                                           for update, path, data in batch]), result)
            pending.append(result)
        answers = await asyncio.gather(*(self.zk.wait(r) for r in pending))
        retry: list[_StateWrite] = []
        moved = False
        for batch, results in zip(batches, answers, strict=True):
            if lease is not None:
                fence_result, results = results[0], results[1:]
                if isinstance(fence_result, (BadVersionError, NoNodeError)):
                    moved = True
                    continue
            failed = first_error(results)
            if failed is None:
                for (update, _, _), version in zip(batch, results, strict=True):
                    outcomes[(update.topic, update.partition)] = version
                continue
            index, error = failed
            update, path, _ = batch[index]
            if isinstance(error, BadVersionError):
                outcomes[(update.topic, update.partition)] = StaleVersion(
                    path, update.expected_version)
            elif isinstance(error, NoNodeError):
                outcomes[(update.topic, update.partition)] = KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No state for partition {update.topic}-{update.partition}.")
            else:
                raise error
            retry.extend(batch[:index] + batch[index + 1:])
        if moved:
            assert lease is not None
            raise ControllerMoved(
                f"/controller_epoch is no longer at version {lease.epoch_zk_version}: "
                f"controller epoch {lease.epoch} (broker {lease.broker_id}) was superseded")
        return retry

    async def watch_partition_states(self, callback: Callback, *,
                                     whole_batches: bool = False) -> WatchHandle:
        def decode(path: str, data: bytes | None, stat: ZnodeStat) -> LeaderAndIsr:
            return zn.decode(path, data, LeaderAndIsr)

        watch: list[ZkWatch] = []
        batches = StateBatches(self._dispatcher, callback, lambda: watch[0].cancelled,
                               whole_batches)

        def on_state(topic: str, partition: int, state: LeaderAndIsr | None,
                     version: int) -> None:
            batches.add(topic, partition,
                        None if state is None else VersionedState(state, version))

        def standard() -> PartitionStatesWatch:
            # a watch per state znode, re-armed by re-reading it (ZooKeeper < 3.6)
            return PartitionStatesWatch(
                self.zk, self._dispatcher, zn.TOPICS, zn.partitions_path,
                zn.partition_state_path, decode, on_state, on_refreshed=batches.flush)

        # one persistent recursive watch over every state, changes re-read in multiReads
        # (zkstatewatch.py); the standard watches if kazoo's internals are not as expected
        tap = EventTap.for_client(self.zk)
        watch.append(standard() if tap is None else RecursiveStatesWatch(
            self.zk, self._dispatcher, tap, decode, on_state, batches.flush, standard))
        return await self._add_watch(watch[0])
