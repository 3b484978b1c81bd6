"""CoordinationBackend on ZooKeeper (kazoo), in Kafka's znode layout (see znodes.py).

`zookeeper.connect` is `host:port[,host:port...][/chroot]`, as in Kafka; the chroot is
created when missing (Kafka does the same), then every path is relative to it.

Controller writes are fenced the way Kafka's KafkaZkClient fences them: each is one
ZooKeeper multi whose first operation checks /controller_epoch's version against the
lease (ControllerMoved when it moved on). Writes too big for one multi (deleting a
topic with many partitions, creating many partition states) go in several multis,
each fenced, with the deletion mark removed last so a new controller finishes the job.

Sessions: when kazoo reports the session lost (expired), requests in flight fail with
CoordinationUnavailable and the on_session_lost callbacks run. kazoo then opens a new
session; the backend re-creates this store's broker registrations, re-arms every watch
and runs the on_session_reestablished callbacks, in that order, on the dispatcher.
After a mere reconnect (same session) watches are re-armed only."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kazoo.client import KazooState, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import ZnodeStat

from pybroker.coordination import znodes as zn
from pybroker.coordination.base import (
    PRODUCER_ID_BLOCK_SIZE,
    ControllerLease,
    TopicAssignment,
    VersionedState,
    validate_assignment,
    validate_topic_name,
)
from pybroker.coordination.errors import (
    BrokerIdInUse,
    ControllerMoved,
    CoordinationUnavailable,
    StaleVersion,
)
from pybroker.coordination.watches import Callback, Dispatcher, WatchHandle, invoke
from pybroker.coordination.zkclient import AsyncKazoo, split_connect
from pybroker.coordination.zkwatches import (
    ChildrenDataWatch,
    DataWatch,
    PartitionStatesWatch,
    ZkWatch,
    read_many,
)
from pybroker.coordination.znodes import BrokerRegistration, LeaderAndIsr
from pybroker.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

#: operations per ZooKeeper multi: stays well under jute.maxbuffer (1 MiB) with Kafka's
#: payload sizes
OPS_PER_MULTI = 500
#: Kafka purges config change notifications older than this (changeExpirationMs)
CONFIG_CHANGE_EXPIRY_MS = 15 * 60 * 1000
#: retries of a compare-and-set that lost a race (producer id blocks, assignments)
CAS_ATTEMPTS_MAX = 100
#: the zero Uuid: stands for a topic id missing in a topic znode Kafka < 2.8 wrote
ZERO_UUID = uuid.UUID(int=0)


def _unknown_topic(name: str) -> KafkaError:
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


def _seq(name: str, prefix: str) -> int:
    """The sequence number of a sequential znode's name (-1 for a foreign name)."""
    tail = name[len(prefix):] if name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else -1


class ZooKeeperBackend:
    """CoordinationBackend on a ZooKeeper ensemble; see the module docstring."""

    def __init__(self, connect: str, *, session_timeout_ms: int,
                 connection_timeout_ms: int | None = None,
                 request_timeout_ms: int | None = None) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_s = session_timeout_ms / 1000
        #: Kafka: zookeeper.connection.timeout.ms defaults to the session timeout
        self.connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self.request_timeout_s = (request_timeout_ms or session_timeout_ms) / 1000
        self.zk = AsyncKazoo(self.hosts + self.chroot, session_timeout_s=self.session_timeout_s,
                             request_timeout_s=self.request_timeout_s, on_state=self._on_state)
        self._dispatcher = Dispatcher()
        self._cluster_id: str | None = None
        self._session: int | None = None
        self._expired = False
        self._closing = False
        self._registrations: dict[int, BrokerRegistration] = {}
        self._watches: set[ZkWatch] = set()
        self._lost_callbacks: dict[WatchHandle, Callback] = {}
        self._reestablished_callbacks: dict[WatchHandle, Callback] = {}

    # --- lifecycle and session ---
    @property
    def cluster_id(self) -> str:
        if self._cluster_id is None:
            raise RuntimeError("start() first")
        return self._cluster_id

    @property
    def session_id(self) -> int | None:
        return self.zk.session_id

    async def start(self) -> None:
        if self.chroot:
            await self._create_chroot()
        await self.zk.start(self.connection_timeout_s)
        self._session = self.zk.session_id
        self._dispatcher.start()
        for path in zn.PERSISTENT_PATHS:
            await self.zk.call("ensure_path", path)
        self._cluster_id = await self._read_or_create_cluster_id()
        log.info("connected to ZooKeeper %s, session 0x%x, cluster id %s", self.connect,
                 self._session or 0, self._cluster_id)

    async def _create_chroot(self) -> None:
        boot = AsyncKazoo(self.hosts, session_timeout_s=self.session_timeout_s,
                          request_timeout_s=self.request_timeout_s)
        await boot.start(self.connection_timeout_s)
        try:
            await boot.call("ensure_path", self.chroot)
        finally:
            await boot.stop()

    async def _read_or_create_cluster_id(self) -> str:
        try:
            data, _ = await self.zk.call("get", zn.CLUSTER_ID)
            return zn.decode(zn.CLUSTER_ID, data, zn.ClusterIdZNode).id
        except NoNodeError:
            pass
        proposed = zn.new_cluster_id()
        try:
            await self.zk.call("create", zn.CLUSTER_ID, zn.encode(zn.ClusterIdZNode(id=proposed)),
                               makepath=True)
            return proposed
        except NodeExistsError:  # another broker was first: use its id
            return await self._read_or_create_cluster_id()

    async def close(self) -> None:
        self._closing = True
        for watch in list(self._watches):
            watch.cancel()
        self._watches.clear()
        await self._dispatcher.close()
        await self.zk.stop()

    def on_session_lost(self, callback: Callback) -> WatchHandle:
        handle = WatchHandle(lambda: self._lost_callbacks.pop(handle, None))
        self._lost_callbacks[handle] = callback
        return handle

    def on_session_reestablished(self, callback: Callback) -> WatchHandle:
        handle = WatchHandle(lambda: self._reestablished_callbacks.pop(handle, None))
        self._reestablished_callbacks[handle] = callback
        return handle

    async def settle(self) -> None:
        """Wait until every callback due so far has run."""
        await self._dispatcher.wait_idle()

    def _on_state(self, state: KazooState, session: int | None) -> None:  # on the loop
        if self._closing:
            return
        if state == KazooState.LOST:
            log.warning("ZooKeeper session 0x%x expired", self._session or 0)
            self._expired = True
            self.zk.session_expired()
            self._dispatcher.submit(self._session_lost)
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection lost; reconnecting")
        elif state == KazooState.CONNECTED:
            renewed = self._expired or (session is not None and session != self._session)
            self._session = session
            self._expired = False
            if renewed:
                log.info("new ZooKeeper session 0x%x", session or 0)
                self._dispatcher.submit(self._session_reestablished)
            else:
                for watch in list(self._watches):
                    self._dispatcher.submit(watch.refresh_all, key=(watch, "all"))

    async def _session_lost(self) -> None:
        for callback in list(self._lost_callbacks.values()):
            await invoke(callback)

    async def _session_reestablished(self) -> None:
        for broker_id, registration in list(self._registrations.items()):
            try:
                await self._create_registration(broker_id, registration)
            except BrokerIdInUse as exc:
                log.error("could not re-register after the session expired: %s", exc)
                self._registrations.pop(broker_id, None)
            except CoordinationUnavailable as exc:
                log.warning("re-registration of broker %d interrupted: %s", broker_id, exc)
        for watch in list(self._watches):
            await watch.refresh_all()
        for callback in list(self._reestablished_callbacks.values()):
            await invoke(callback)

    async def _add_watch(self, watch: ZkWatch) -> WatchHandle:
        self._watches.add(watch)
        await self._dispatcher.run(watch.refresh_all)

        def cancel() -> None:
            watch.cancel()
            self._watches.discard(watch)

        return WatchHandle(cancel)

    # --- transactions ---
    def _multi(self, lease: ControllerLease | None) -> TransactionRequest:
        txn = self.zk.kazoo.transaction()
        if lease is not None:
            txn.check(zn.CONTROLLER_EPOCH, lease.epoch_zk_version)
        return txn

    async def _commit(self, txn: TransactionRequest, lease: ControllerLease | None) -> list[Any]:
        """Commit; ControllerMoved if the lease's fence failed. Otherwise the results,
        without the fence's (failed operations are kazoo exceptions in the list)."""
        results = await self.zk.commit(txn)
        if lease is not None:
            fence, results = results[0], results[1:]
            if isinstance(fence, (BadVersionError, NoNodeError)):
                raise ControllerMoved(
                    f"/controller_epoch is no longer at version {lease.epoch_zk_version}: "
                    f"controller epoch {lease.epoch} (broker {lease.broker_id}) was superseded")
        return results

    @staticmethod
    def _first_error(results: list[Any]) -> tuple[int, Exception] | None:
        for index, result in enumerate(results):
            # the operation that failed; the others report RolledBack / RuntimeInconsistency
            if isinstance(result, Exception) and not isinstance(
                    result, (RolledBackError, RuntimeInconsistency)):
                return index, result
        return None

    # --- brokers ---
    async def register_broker(self, broker_id: int, registration: BrokerRegistration) -> None:
        if broker_id in self._registrations:
            raise BrokerIdInUse(broker_id, zn.broker_path(broker_id))
        await self._create_registration(broker_id, registration)
        self._registrations[broker_id] = registration

    async def _create_registration(self, broker_id: int,
                                   registration: BrokerRegistration) -> None:
        """Kafka's checkedEphemeralCreate: an existing node is ours only if this session
        owns it (a create retried after a lost answer); otherwise the id is taken."""
        path = zn.broker_path(broker_id)
        data = zn.encode(registration)
        try:
            await self.zk.call("create", path, data, ephemeral=True, makepath=True)
            return
        except NodeExistsError:
            pass
        stat: ZnodeStat | None = await self.zk.call("exists", path)
        if stat is not None and stat.ephemeralOwner == self.zk.session_id:
            await self.zk.call("set", path, data)
            return
        if stat is None:  # gone meanwhile (the old session just expired): try again
            return await self._create_registration(broker_id, registration)
        raise BrokerIdInUse(broker_id, path)

    async def unregister_broker(self, broker_id: int) -> None:
        if self._registrations.pop(broker_id, None) is None:
            return
        try:
            await self.zk.call("delete", zn.broker_path(broker_id))
        except NoNodeError:
            pass

    async def live_brokers(self) -> dict[int, BrokerRegistration]:
        ids = [c for c in await self.zk.call("get_children", zn.BROKER_IDS) if c.isdigit()]
        paths = [zn.broker_path(int(i)) for i in ids]
        reads = await read_many(self.zk, paths, [None] * len(paths))
        return {int(i): zn.decode(path, read[0], BrokerRegistration)
                for i, path, read in zip(ids, paths, reads, strict=True) if read is not None}

    async def watch_brokers(self, callback: Callback) -> WatchHandle:
        def decode(path: str, data: bytes | None, stat: ZnodeStat) -> BrokerRegistration:
            return zn.decode(path, data, BrokerRegistration)

        async def on_set(values: dict[str, tuple[BrokerRegistration | None, int]]) -> None:
            await invoke(callback, {int(k): v for k, (v, _) in values.items()
                                    if k.isdigit() and v is not None})

        return await self._add_watch(ChildrenDataWatch(
            self.zk, self._dispatcher, zn.BROKER_IDS, data_path=lambda c: f"{zn.BROKER_IDS}/{c}",
            decode=decode, on_set=on_set))

    # --- controller ---
    async def controller_epoch(self) -> tuple[int, int]:
        try:
            data, stat = await self.zk.call("get", zn.CONTROLLER_EPOCH)
        except NoNodeError:
            return 0, -1
        return zn.decode_controller_epoch(zn.CONTROLLER_EPOCH, data), stat.version

    async def try_elect_controller(self, broker_id: int) -> ControllerLease | None:
        epoch, version = await self.controller_epoch()
        if version == -1:  # Kafka creates it holding 0 before the first election
            try:
                await self.zk.call("create", zn.CONTROLLER_EPOCH, b"0")
            except NodeExistsError:
                pass
            epoch, version = await self.controller_epoch()
        txn = self.zk.kazoo.transaction()
        txn.create(zn.CONTROLLER, zn.encode(zn.ControllerZNode(
            brokerid=broker_id, timestamp=zn.now_ms_text())), ephemeral=True)
        txn.set_data(zn.CONTROLLER_EPOCH, str(epoch + 1).encode(), version)
        results = await self.zk.commit(txn)
        failed = self._first_error(results)
        if failed is not None:
            if isinstance(failed[1], (NodeExistsError, BadVersionError)):
                return None  # someone else is controller, or won the race for this epoch
            raise failed[1]
        stat: ZnodeStat = results[1]
        log.info("broker %d elected controller, epoch %d", broker_id, epoch + 1)
        return ControllerLease(broker_id=broker_id, epoch=epoch + 1,
                               epoch_zk_version=stat.version)

    async def controller_id(self) -> int | None:
        try:
            data, _ = await self.zk.call("get", zn.CONTROLLER)
        except NoNodeError:
            return None
        return zn.decode(zn.CONTROLLER, data, zn.ControllerZNode).brokerid

    async def watch_controller(self, callback: Callback) -> WatchHandle:
        def decode(path: str, data: bytes | None, stat: ZnodeStat) -> int:
            return zn.decode(path, data, zn.ControllerZNode).brokerid

        return await self._add_watch(DataWatch(self.zk, self._dispatcher, zn.CONTROLLER, decode,
                                               callback))

    async def resign(self, lease: ControllerLease) -> None:
        """Kafka's deleteController: a fenced delete, so it never removes a successor."""
        try:
            data, stat = await self.zk.call("get", zn.CONTROLLER)
        except NoNodeError:
            return
        if zn.decode(zn.CONTROLLER, data, zn.ControllerZNode).brokerid != lease.broker_id:
            return
        txn = self._multi(lease)
        txn.delete(zn.CONTROLLER, stat.version)
        try:
            await self._commit(txn, lease)
        except ControllerMoved:
            pass

    # --- topics ---
    async def topic_assignments(self) -> dict[str, TopicAssignment]:
        names = await self.zk.call("get_children", zn.TOPICS)
        paths = [zn.topic_path(n) for n in names]
        reads = await read_many(self.zk, paths, [None] * len(paths))
        return {name: _decode_assignment(name, path, read[0])
                for name, path, read in zip(names, paths, reads, strict=True) if read is not None}

    async def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str],
                           lease: ControllerLease | None = None) -> None:
        name = assignment.name
        validate_topic_name(name)
        validate_assignment(assignment.partitions)
        if await self.zk.call("exists", zn.delete_topic_path(name)):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"Topic '{name}' is marked for deletion.")
        config_data = zn.encode(zn.TopicConfigZNode(config=dict(configs)))
        config_exists = await self.zk.call("exists", zn.topic_config_path(name)) is not None
        for _ in range(CAS_ATTEMPTS_MAX):
            # Kafka writes the configs first, so a broker seeing the topic sees its configs
            txn = self._multi(lease)
            if config_exists:
                txn.set_data(zn.topic_config_path(name), config_data)
            else:
                txn.create(zn.topic_config_path(name), config_data)
            txn.create(zn.topic_path(name), _encode_assignment(assignment))
            failed = self._first_error(await self._commit(txn, lease))
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
                                       lease: ControllerLease | None = None) -> None:
        name = assignment.name
        validate_assignment(assignment.partitions)
        path = zn.topic_path(name)
        for _ in range(CAS_ATTEMPTS_MAX):
            try:
                data, stat = await self.zk.call("get", path)
            except NoNodeError:
                raise _unknown_topic(name) from None
            current = _decode_assignment(name, path, data)
            if current.topic_id != assignment.topic_id:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Topic '{name}' has another topic id now.")
            if len(assignment.partitions) < len(current.partitions):
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic '{name}' cannot lose partitions.")
            txn = self._multi(lease)
            txn.set_data(path, _encode_assignment(assignment), stat.version)
            failed = self._first_error(await self._commit(txn, lease))
            if failed is None:
                return
            if isinstance(failed[1], NoNodeError):
                raise _unknown_topic(name)
            if not isinstance(failed[1], BadVersionError):
                raise failed[1]
        raise CoordinationUnavailable(f"updating the assignment of {name} kept racing")

    async def watch_topics(self, callback: Callback) -> WatchHandle:
        def decode(path: str, data: bytes | None, stat: ZnodeStat) -> TopicAssignment:
            return _decode_assignment(path.rsplit("/", 1)[1], path, data)

        async def on_set(values: dict[str, tuple[TopicAssignment | None, int]]) -> None:
            await invoke(callback, {k: v for k, (v, _) in values.items() if v is not None})

        return await self._add_watch(ChildrenDataWatch(
            self.zk, self._dispatcher, zn.TOPICS, data_path=zn.topic_path, decode=decode,
            on_set=on_set))

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
        path = zn.topic_config_path(name)
        data = zn.encode(zn.TopicConfigZNode(config=dict(configs)))
        notification = zn.encode(zn.ConfigChangeNotification(entity_path=f"topics/{name}"))
        exists = await self.zk.call("exists", path) is not None
        for _ in range(CAS_ATTEMPTS_MAX):
            txn = self.zk.kazoo.transaction()
            txn.check(zn.topic_path(name), -1)
            if exists:
                txn.set_data(path, data)
            else:
                txn.create(path, data)
            txn.create(f"{zn.CONFIG_CHANGES}/{zn.CONFIG_CHANGE_PREFIX}", notification,
                       sequence=True)
            failed = self._first_error(await self.zk.commit(txn))
            if failed is None:
                return
            index, error = failed
            if index == 0:
                raise _unknown_topic(name)
            if index == 1 and isinstance(error, (NodeExistsError, NoNodeError)):
                exists = not exists
                continue
            raise error
        raise CoordinationUnavailable(f"setting the configs of {name} kept racing")

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
                    log.error("%s", exc)
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
        failed = self._first_error(await self.zk.commit(txn))
        if failed is None or isinstance(failed[1], NodeExistsError):
            return  # already marked: Kafka ignores a second request
        if failed[0] == 0:
            raise _unknown_topic(name)
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
        its configs, then its deletion mark; every multi fenced."""
        for _ in range(CAS_ATTEMPTS_MAX):
            if not await self.zk.call("exists", zn.topic_path(name)):
                raise _unknown_topic(name)
            doomed = await self._subtree(zn.topic_path(name))
            tail = [p for p in (zn.topic_config_path(name), zn.delete_topic_path(name))
                    if await self.zk.call("exists", p)]
            try:
                await self._delete_in_multis(doomed + tail, lease)
                return
            except (NotEmptyError, NoNodeError):
                continue  # the tree changed under us: list it again
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

    async def _delete_in_multis(self, paths: list[str], lease: ControllerLease) -> None:
        for start in range(0, len(paths), OPS_PER_MULTI):
            txn = self._multi(lease)
            for path in paths[start:start + OPS_PER_MULTI]:
                txn.delete(path)
            failed = self._first_error(await self._commit(txn, lease))
            if failed is not None:
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
            raise _unknown_topic(topic) from None
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
            txn = self._multi(lease)
            if not parent_exists:
                txn.create(zn.partitions_path(topic))
                parent_exists = True
            chunk = todo[start:start + per_multi]
            for partition in chunk:
                if str(partition) not in existing:
                    txn.create(zn.partition_path(topic, partition))
                txn.create(zn.partition_state_path(topic, partition),
                           zn.encode(states[partition]))
            failed = self._first_error(await self._commit(txn, lease))
            if failed is not None:
                index, error = failed
                op = txn.operations[index + (1 if lease is not None else 0)]
                if isinstance(error, NodeExistsError) and op.path.endswith("/state"):
                    raise StaleVersion(op.path, -1)
                if isinstance(error, NoNodeError):
                    raise _unknown_topic(topic)
                raise error
        return dict.fromkeys(states, 0)

    async def update_partition_state(self, topic: str, partition: int, state: LeaderAndIsr,
                                     expected_version: int,
                                     lease: ControllerLease | None = None) -> int:
        path = zn.partition_state_path(topic, partition)
        txn = self._multi(lease)
        txn.set_data(path, zn.encode(state), expected_version)
        results = await self._commit(txn, lease)
        result = results[0]
        if isinstance(result, BadVersionError):
            raise StaleVersion(path, expected_version)
        if isinstance(result, NoNodeError):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"No state for partition {topic}-{partition}.")
        if isinstance(result, Exception):
            raise result
        return result.version

    async def watch_partition_states(self, callback: Callback) -> WatchHandle:
        def decode(path: str, data: bytes | None, stat: ZnodeStat) -> LeaderAndIsr:
            return zn.decode(path, data, LeaderAndIsr)

        async def on_state(topic: str, partition: int, state: LeaderAndIsr | None,
                           version: int) -> None:
            await invoke(callback, topic, partition,
                         None if state is None else VersionedState(state, version))

        return await self._add_watch(PartitionStatesWatch(
            self.zk, self._dispatcher, zn.TOPICS, zn.partitions_path, zn.partition_state_path,
            decode, on_state))

    # --- ISR change notifications ---
    async def notify_isr_change(self, partitions: Iterable[tuple[str, int]]) -> None:
        refs = [zn.TopicPartitionRef(t, p) for t, p in sorted(set(partitions))]
        if refs:
            await self.zk.call("create", f"{zn.ISR_CHANGES}/{zn.ISR_CHANGE_PREFIX}",
                               zn.encode(zn.IsrChangeNotification(partitions=refs)),
                               sequence=True)

    async def watch_isr_changes(self, callback: Callback) -> WatchHandle:
        async def on_set(values: dict[str, Any]) -> None:
            if values:
                await invoke(callback)

        return await self._add_watch(ChildrenDataWatch(self.zk, self._dispatcher, zn.ISR_CHANGES,
                                                       on_set=on_set))

    async def consume_isr_changes(self) -> set[tuple[str, int]]:
        children = await self.zk.call("get_children", zn.ISR_CHANGES)
        paths = [f"{zn.ISR_CHANGES}/{c}" for c in children]
        reads = await read_many(self.zk, paths, [None] * len(paths))
        changed: set[tuple[str, int]] = set()
        for path, read in zip(paths, reads, strict=True):
            if read is None:
                continue
            try:
                notification = zn.decode(path, read[0], zn.IsrChangeNotification)
                changed.update((ref.topic, ref.partition) for ref in notification.partitions)
            except zn.MalformedZNode as exc:
                log.error("%s (dropped)", exc)
            try:
                await self.zk.call("delete", path)
            except NoNodeError:
                pass
        return changed

    # --- producer ids ---
    async def allocate_producer_ids(self, broker_id: int,
                                    count: int = PRODUCER_ID_BLOCK_SIZE) -> range:
        """Kafka's ZkProducerIdManager: read the latest block, write the next one with a
        conditional set; a lost race reads again."""
        path = zn.PRODUCER_ID_BLOCK
        for _ in range(CAS_ATTEMPTS_MAX):
            try:
                data, stat = await self.zk.call("get", path)
            except NoNodeError:
                data, stat = None, None
            start = 0
            if data:
                _, last = zn.decode(path, data, zn.ProducerIdBlockZNode).bounds(path)
                start = last + 1
            end = start + count - 1
            if end >= 1 << 63:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 "Producer ids are exhausted")
            block = zn.encode(zn.ProducerIdBlockZNode(broker=broker_id, block_start=str(start),
                                                      block_end=str(end)))
            try:
                if stat is None:
                    await self.zk.call("create", path, block)
                else:
                    await self.zk.call("set", path, block, version=stat.version)
            except (BadVersionError, NodeExistsError):
                continue
            return range(start, end + 1)
        raise CoordinationUnavailable("allocating producer ids kept racing")

