"""CoordinationBackend on ZooKeeper (kazoo), in Kafka's znode layout (see znodes.py).

`zookeeper.connect` is `host:port[,host:port...][/chroot]`, as in Kafka; the chroot is
created when missing (Kafka does the same), then every path is relative to it.

Controller writes are fenced the way Kafka's KafkaZkClient fences them: each is one
ZooKeeper multi whose first operation checks /controller_epoch's version against the
lease (ControllerMoved when it moved on). Writes too big for one multi (deleting a
topic with many partitions, creating many partition states) go in several multis,
each fenced, with the deletion mark removed last so a new controller finishes the job.

Sessions: when kazoo reports the session lost (expired), requests in flight fail with
CoordinationUnavailable and the on_session_lost callbacks run. kazoo only learns of an
expiry from the server, once it reaches one again; a broker cut off from ZooKeeper
would go on leading partitions that the controller has long given to others. So,
as Curator 3 does, a connection lost for a whole session timeout counts as an
expired session here: the on_session_lost callbacks run then (the broker fences
itself) and the next connection is handled as a new session. kazoo then opens a new
session; the backend re-creates this store's broker registrations, re-arms every watch
and runs the on_session_reestablished callbacks, in that order, on the dispatcher.
After a mere reconnect (same session) watches are re-armed only."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from pybroker.coordination import znodes as zn
from pybroker.coordination.base import PRODUCER_ID_BLOCK_SIZE, ControllerLease
from pybroker.coordination.errors import (
    BrokerIdInUse,
    ControllerMoved,
    CoordinationUnavailable,
)
from pybroker.coordination.watches import Callback, Dispatcher, WatchHandle, invoke
from pybroker.coordination.zkclient import (
    AsyncKazoo,
    commit,
    fenced_multi,
    first_error,
    kazoo_errors_translated,
    split_connect,
)
from pybroker.coordination.zkconfigs import EntityConfigOps
from pybroker.coordination.zktopics import RACE_RETRIES_MAX, TopicOps
from pybroker.coordination.zkwatches import ChildrenDataWatch, DataWatch, ZkWatch, read_many
from pybroker.coordination.znodes import BrokerRegistration
from pybroker.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


@kazoo_errors_translated
class ZooKeeperBackend(TopicOps, EntityConfigOps):
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
        self._started = False
        self._expired = False
        self._closing = False
        #: presumes the session expired when the connection stays lost this long
        self._expiry_timer: asyncio.TimerHandle | None = None
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
        self._started = True  # session events count from here
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
        self._cancel_expiry_timer()
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
        if self._closing or not self._started:
            return
        if state == KazooState.LOST:
            log.warning("ZooKeeper session 0x%x expired: this broker registers again with a "
                        "new one, and leads nothing until then. If it repeats, check "
                        "ZooKeeper's health and zookeeper.session.timeout.ms",
                        self._session or 0)
            self._cancel_expiry_timer()
            presumed, self._expired = self._expired, True
            self.zk.session_expired()
            if not presumed:
                self._dispatcher.submit(self._session_lost)
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection lost; reconnecting. Nothing to do if it is back "
                        "within the session timeout (%.1fs)", self.session_timeout_s)
            if self._expiry_timer is None and not self._expired:
                self._expiry_timer = asyncio.get_running_loop().call_later(
                    self.session_timeout_s, self._presume_expired)
        elif state == KazooState.CONNECTED:
            self._cancel_expiry_timer()
            renewed = self._expired or (session is not None and session != self._session)
            self._session = session
            self._expired = False
            if renewed:
                log.info("new ZooKeeper session 0x%x", session or 0)
                self._dispatcher.submit(self._session_reestablished)
            else:
                for watch in list(self._watches):
                    self._dispatcher.submit(watch.refresh_all, key=(watch, "all"))

    def _cancel_expiry_timer(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None

    def _presume_expired(self) -> None:
        """No server reached for a whole session timeout: the server has expired the
        session by now (it counts from the last contact, before the loss was noticed),
        so act on it without waiting to hear it from a server."""
        self._expiry_timer = None
        if self._closing or self._expired or self.zk.kazoo.connected:
            return
        log.warning("no contact with ZooKeeper for the session timeout (%.1fs): session 0x%x "
                    "presumed expired", self.session_timeout_s, self._session or 0)
        self._expired = True
        self._dispatcher.submit(self._session_lost)

    async def _session_lost(self) -> None:
        for callback in list(self._lost_callbacks.values()):
            await invoke(callback)

    async def _session_reestablished(self) -> None:
        for broker_id, registration in list(self._registrations.items()):
            try:
                await self._create_registration(broker_id, registration)
            except BrokerIdInUse as exc:
                log.error("could not register broker %d again after its session expired: "
                          "%s. It serves no partitions; restart it", broker_id, exc)
                self._registrations.pop(broker_id, None)
            except CoordinationUnavailable as exc:
                log.warning("registering broker %d again was interrupted: %s; tried again "
                            "once ZooKeeper is back", broker_id, exc)
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

    # --- brokers ---
    async def register_broker(self, broker_id: int, registration: BrokerRegistration) -> int:
        if broker_id in self._registrations:
            raise BrokerIdInUse(broker_id, zn.broker_path(broker_id))
        epoch = await self._create_registration(broker_id, registration)
        self._registrations[broker_id] = registration
        return epoch

    async def _create_registration(self, broker_id: int,
                                   registration: BrokerRegistration) -> int:
        """Kafka's checkedEphemeralCreate: an existing node is ours only if this session
        owns it (a create retried after a lost answer); otherwise the id is taken.
        Returns the broker epoch: the znode's creation zxid, as Kafka's."""
        path = zn.broker_path(broker_id)
        data = zn.encode(registration)
        for _ in range(RACE_RETRIES_MAX):
            try:
                _, stat = await self.zk.call("create", path, data, ephemeral=True,
                                             makepath=True, include_data=True)
                return stat.czxid
            except NodeExistsError:
                pass
            stat = await self.zk.call("exists", path)
            if stat is None:  # gone meanwhile (an old session just expired): again
                continue
            if stat.ephemeralOwner != self.zk.session_id:
                raise BrokerIdInUse(broker_id, path)
            await self.zk.call("set", path, data)
            return stat.czxid
        raise CoordinationUnavailable(f"registering broker {broker_id} kept racing")

    async def unregister_broker(self, broker_id: int) -> None:
        if self._registrations.pop(broker_id, None) is None:
            return
        try:
            await self.zk.call("delete", zn.broker_path(broker_id))
        except NoNodeError:
            pass

    async def remove_stale_registration(self, broker_id: int, session: int) -> bool:
        """See CoordinationBackend: the previous process's session is recognised by the
        znodes' ephemeralOwner, which only that session's ephemerals carry."""
        if session == self.zk.session_id:
            return False
        path = zn.broker_path(broker_id)
        stat = await self.zk.call("exists", path)
        if stat is not None and stat.ephemeralOwner != session:
            return False  # another process's: wait for it
        await self._remove_controller_if(lambda controller, held:
                                         controller == broker_id
                                         and held.ephemeralOwner == session)
        if stat is None:
            return True  # gone meanwhile: register now
        try:
            await self.zk.call("delete", path, version=stat.version)
        except NoNodeError:
            pass
        except BadVersionError:
            return False
        log.info("removed broker %d's registration left by its previous process (session "
                 "0x%x, broker epoch %d)", broker_id, session, stat.czxid)
        return True

    async def _remove_controller_if(self, holds: Callable[[int, ZnodeStat], bool]) -> bool:
        """Delete /controller when `holds(controller id, stat)`, in one transaction with
        a check that /controller_epoch did not move since it was read: a controller
        elected meanwhile (whose /controller may look the same) is never removed. The
        epoch is read first, so a /controller read after it belongs to that epoch."""
        _, epoch_version = await self.controller_epoch()
        try:
            data, stat = await self.zk.call("get", zn.CONTROLLER)
        except NoNodeError:
            return False
        controller = zn.decode(zn.CONTROLLER, data, zn.ControllerZNode).brokerid
        if epoch_version < 0 or not holds(controller, stat):
            return False
        txn = self.zk.kazoo.transaction()
        txn.check(zn.CONTROLLER_EPOCH, epoch_version)
        txn.delete(zn.CONTROLLER, stat.version)
        failed = first_error(await self.zk.commit(txn))
        if failed is not None:
            if isinstance(failed[1], (NoNodeError, BadVersionError)):
                return False
            raise failed[1]
        log.info("removed /controller of broker %d (session 0x%x)", controller,
                 stat.ephemeralOwner)
        return True

    async def remove_dead_controller(self, broker_id: int) -> bool:
        return await self._remove_controller_if(lambda controller, stat:
                                                controller == broker_id)

    async def live_brokers(self) -> dict[int, BrokerRegistration]:
        ids = [c for c in await self.zk.call("get_children", zn.BROKER_IDS) if c.isdigit()]
        paths = [zn.broker_path(int(i)) for i in ids]
        reads = await read_many(self.zk, paths, [None] * len(paths))
        return {int(i): zn.decode(path, read[0], BrokerRegistration)
                for i, path, read in zip(ids, paths, reads, strict=True) if read is not None}

    async def broker_epochs(self) -> dict[int, int]:
        ids = [c for c in await self.zk.call("get_children", zn.BROKER_IDS) if c.isdigit()]
        paths = [zn.broker_path(int(i)) for i in ids]
        reads = await read_many(self.zk, paths, [None] * len(paths))
        return {int(i): read[1].czxid for i, read in zip(ids, reads, strict=True)
                if read is not None}

    async def broker_epoch(self, broker_id: int) -> int | None:
        stat = await self.zk.call("exists", zn.broker_path(broker_id))
        return None if stat is None else stat.czxid

    async def watch_brokers(self, callback: Callback) -> WatchHandle:
        async def without_epochs(brokers: dict[int, tuple[BrokerRegistration, int]]) -> None:
            await invoke(callback, {b: registration for b, (registration, _) in brokers.items()})
        return await self.watch_broker_epochs(without_epochs)

    async def watch_broker_epochs(self, callback: Callback) -> WatchHandle:
        def decode(path: str, data: bytes | None, stat: ZnodeStat
                   ) -> tuple[BrokerRegistration, int]:
            return zn.decode(path, data, BrokerRegistration), stat.czxid

        async def on_set(values: dict[str, tuple[tuple[BrokerRegistration, int] | None, int]]
                         ) -> None:
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
        failed = first_error(results)
        if failed is not None:
            if isinstance(failed[1], (NodeExistsError, BadVersionError)):
                return await self._own_controller_lease(broker_id)
            raise failed[1]
        stat: ZnodeStat = results[1]
        log.info("broker %d elected controller, epoch %d", broker_id, epoch + 1)
        return ControllerLease(broker_id=broker_id, epoch=epoch + 1,
                               epoch_zk_version=stat.version)

    async def _own_controller_lease(self, broker_id: int) -> ControllerLease | None:
        """After a lost election: None, unless /controller is this session's for
        `broker_id` (an earlier attempt won but its answer was lost), in which case the
        current epoch is ours: nobody can bump it while /controller exists (Kafka's
        checkControllerAndEpoch)."""
        try:
            data, stat = await self.zk.call("get", zn.CONTROLLER)
        except NoNodeError:
            return None
        controller = zn.decode(zn.CONTROLLER, data, zn.ControllerZNode)
        if controller.brokerid != broker_id or stat.ephemeralOwner != self.zk.session_id:
            return None
        epoch, version = await self.controller_epoch()
        return ControllerLease(broker_id=broker_id, epoch=epoch, epoch_zk_version=version)

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
        txn = fenced_multi(self.zk, lease)
        txn.delete(zn.CONTROLLER, stat.version)
        try:
            await commit(self.zk, txn, lease)
        except ControllerMoved:
            pass

    # --- reassignment requests (Kafka's /admin/reassign_partitions) ---
    async def watch_reassignment_requests(self, callback: Callback) -> WatchHandle:
        def decode(path: str, data: bytes | None, stat: ZnodeStat
                   ) -> dict[tuple[str, int], list[int]]:
            raw = zn.decode(path, data, zn.ReassignPartitionsZNode)
            return {(p.topic, p.partition): list(p.replicas) for p in raw.partitions}

        async def on_change(value: dict[tuple[str, int], list[int]] | None) -> None:
            if value:
                await invoke(callback, value)

        return await self._add_watch(DataWatch(self.zk, self._dispatcher,
                                               zn.REASSIGN_PARTITIONS, decode, on_change))

    async def clear_reassignment_requests(self, lease: ControllerLease) -> None:
        txn = fenced_multi(self.zk, lease)
        txn.delete(zn.REASSIGN_PARTITIONS)
        failed = first_error(await commit(self.zk, txn, lease))
        if failed is not None and not isinstance(failed[1], NoNodeError):
            raise failed[1]

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

    # --- replicas on failed log dirs ---
    async def report_offline_replicas(self, broker_id: int, broker_epoch: int,
                                      partitions: Iterable[tuple[str, int]]) -> None:
        path = zn.offline_replicas_path(broker_id)
        data = zn.encode(zn.OfflineReplicas(
            broker_epoch=broker_epoch,
            partitions=[zn.TopicPartitionRef(t, p) for t, p in sorted(set(partitions))]))
        for _ in range(RACE_RETRIES_MAX):
            stat = await self.zk.call("exists", path)
            if stat is None:
                try:
                    await self.zk.call("create", path, data, ephemeral=True, makepath=True)
                    return
                except NodeExistsError:
                    continue
            if stat.ephemeralOwner != self.zk.session_id:
                # a previous process's (its session not expired yet): it would vanish
                # with that session, taking this report along
                try:
                    await self.zk.call("delete", path, version=stat.version)
                except (NoNodeError, BadVersionError):
                    pass
                continue
            try:
                await self.zk.call("set", path, data, version=stat.version)
                return
            except (NoNodeError, BadVersionError):
                continue
        raise CoordinationUnavailable(f"reporting broker {broker_id}'s offline replicas "
                                      "kept racing")

    async def watch_offline_replicas(self, callback: Callback) -> WatchHandle:
        def decode(path: str, data: bytes | None, stat: ZnodeStat) -> zn.OfflineReplicas:
            return zn.decode(path, data, zn.OfflineReplicas)

        async def on_set(values: dict[str, tuple[zn.OfflineReplicas | None, int]]) -> None:
            await invoke(callback, {int(k): v for k, (v, _) in values.items()
                                    if k.isdigit() and v is not None})

        return await self._add_watch(ChildrenDataWatch(
            self.zk, self._dispatcher, zn.OFFLINE_REPLICAS,
            data_path=lambda c: f"{zn.OFFLINE_REPLICAS}/{c}", decode=decode, on_set=on_set))

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
        for _ in range(RACE_RETRIES_MAX):
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

