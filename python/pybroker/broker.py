"""The broker: wires config, the coordination store, logs, replicas and the
network together, and runs them until it is stopped.

A single node is a cluster of one, not a second code path. Without
zookeeper.connect the coordination store is the embedded one (a file in the
data dir); with it, ZooKeeper. Either way the broker registers itself, stands
for controller (alone, it always wins), and learns every topic and partition
state through the store's watches (metadata/listener.py), which the metadata
cache and the replica layer take on; leaders and followers, the purgatory and
the group coordinator work the same on one node or many."""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from pybroker.admin.broker_configs import CONNECTION_LIMIT_KEYS, DynamicBrokerConfigs
from pybroker.admin.group_configs import GroupConfigs
from pybroker.admin.topics import TopicAdmin
from pybroker.config import BrokerConfig
from pybroker.controller.controller import Controller
from pybroker.controller.shutdown import controlled_shutdown
from pybroker.coordination.base import CoordinationBackend
from pybroker.coordination.errors import BrokerIdInUse
from pybroker.coordination.znodes import BrokerRegistration
from pybroker.fetch.sessions import FetchSessionCache
from pybroker.group import GroupCoordinator
from pybroker.group.offsets import OFFSETS_TOPIC
from pybroker.handlers.context import BrokerContext
from pybroker.log.dir_lock import DirLock, lock_dirs, release_all
from pybroker.log.manager import LogManager
from pybroker.metadata.cache import MetadataCache
from pybroker.metadata.listener import MetadataListener
from pybroker.metadata.publisher import MetadataPublisher
from pybroker.metrics import BrokerMetrics
from pybroker.producer.ids import ProducerIdAllocator
from pybroker.purgatory import Purgatory
from pybroker.replica.fetcher import ReplicaFetcherManager
from pybroker.replica.isr import IsrManager
from pybroker.replica.manager import ReplicaManager
from pybroker.replica.offline_dirs import OfflineDirReporter
from pybroker.server.acceptor import ConnectionServer
from pybroker.security.tls import server_contexts
from pybroker.server.listeners import bind_listeners, inter_broker_listener, listener_settings
from pybroker.transaction import markers as txn_markers
from pybroker.transaction.coordinator import TransactionCoordinator
from pybroker.transaction.log import TRANSACTION_STATE_TOPIC, TransactionLog

log = logging.getLogger(__name__)

#: pause between attempts to register while an old registration lingers
REGISTER_RETRY_S = 0.5
#: in the first log dir: the ZooKeeper session that holds this broker's registration,
#: so that the next process of this broker recognises what this one left behind
SESSION_FILE = "zookeeper.session"


class StartupPhases:
    """How long each start-up phase took, for the one "started in" line: where a slow
    start (thousands of logs, a loaded machine) spends its time."""

    def __init__(self) -> None:
        self.started = self.last = time.monotonic()
        self.phases: list[tuple[str, float]] = []

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.phases.append((name, now - self.last))
        self.last = now

    def __str__(self) -> str:
        each = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in self.phases)
        return f"{self.last - self.started:.2f} s ({each})"


def _txn_leadership(txn: TransactionCoordinator, replicas: ReplicaManager, index: int,
                    leads: bool) -> None:
    partition = replicas.get(TRANSACTION_STATE_TOPIC, index)
    if leads and partition is not None:
        txn.partition_led(index, partition.leader_epoch)
    else:
        txn.partition_lost(index)


def open_backend(config: BrokerConfig) -> CoordinationBackend:
    """ZooKeeper when zookeeper.connect is set, else the embedded single-node store."""
    connect = config["zookeeper.connect"]
    if connect:
        from pybroker.coordination.zookeeper import ZooKeeperBackend

        return ZooKeeperBackend(
            connect, session_timeout_ms=config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=config["zookeeper.connection.timeout.ms"])
    from pybroker.coordination.embedded import EmbeddedBackend

    return EmbeddedBackend(config.log_dirs[0], config.broker_id)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.listeners, self.advertised = listener_settings(config)
        self.tls_contexts = server_contexts(config, self.listeners)
        # bound before anything touches the data dir: a bad listener or a port in use
        # must fail the start without leaving a new data dir behind
        self._sockets = bind_listeners(self.listeners)
        self.metrics = BrokerMetrics()
        self.purgatory = Purgatory()
        self.bound_ports: list[int] = []
        self._stop = anyio.Event()
        # made in serve(), once the store is reachable (the cluster id comes from it)
        self.context: BrokerContext | None = None

    def stop(self) -> None:
        self._stop.set()

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind the listeners, join the cluster (or start the cluster of one), serve
        until stop() or a signal, then shut down cleanly."""
        sockets = self._sockets
        self.bound_ports = [s.getsockname()[1] for s in sockets]
        locks: list[DirLock] = []
        backend: CoordinationBackend | None = None
        logs: LogManager | None = None
        phases = StartupPhases()
        try:
            # before anything in a data dir is read or written (the embedded store's file
            # is in the first one): a second broker on a live broker's dirs stops here
            locks = lock_dirs(self.config.log_dirs)
            backend = open_backend(self.config)
            await backend.start()
            phases.done("coordination store")
            logs = LogManager(self.config, backend.cluster_id)
            logs.startup()
            phases.done("log dirs")
            await self._run(backend, logs, sockets, task_status, phases)
        finally:
            for sock in sockets:
                sock.close()
            if backend is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await backend.close()
                    except Exception as exc:  # the store may be unreachable by now
                        log.info("closing the coordination store: %s", exc)
            if logs is not None:
                logs.shutdown()
                log.info("shut down cleanly")
            release_all(locks)  # last: the shutdown's writes are still under the lock

    async def _run(self, backend: CoordinationBackend, logs: LogManager,
                   sockets: list[socket.socket], task_status: Any,
                   phases: StartupPhases) -> None:
        config, broker_id = self.config, self.broker_id
        metadata = MetadataCache(backend.cluster_id)
        fetchers = ReplicaFetcherManager(broker_id, metadata, config)
        replicas = ReplicaManager(broker_id, logs, self.purgatory, fetchers)
        replicas.known_partition = lambda t, i: metadata.partition(t, i) is not None
        publisher = MetadataPublisher(metadata, replicas, self.purgatory)
        admin = TopicAdmin(config, backend, metadata, self.purgatory)
        groups = GroupCoordinator.for_broker(config, metadata, replicas, admin)
        groups.owned = set()  # groups come with the offsets partitions this broker leads
        replicas.leadership_listeners.append(
            lambda topic, index, leads: (groups.partition_led(index) if leads
                                         else groups.partition_lost(index))
            if topic == OFFSETS_TOPIC else None)
        producer_ids = ProducerIdAllocator(backend, broker_id)
        # transactions: coordinator of the ids whose __transaction_state partition is led
        # here; the group coordinator hears of the markers ending TxnOffsetCommits
        txn = TransactionCoordinator(
            config, TransactionLog(config, metadata, replicas, admin, self.purgatory),
            producer_ids)
        replicas.leadership_listeners.append(
            lambda topic, index, leads: _txn_leadership(txn, replicas, index, leads)
            if topic == TRANSACTION_STATE_TOPIC else None)
        txn_markers.add_marker_listener(groups.on_txn_marker)
        broker_configs = DynamicBrokerConfigs(config, backend, broker_id)
        # open logs re-read their topic config: a changed log.* default reaches every
        # partition that does not override it
        broker_configs.listeners.append(lambda changed: logs.reconfigure())
        broker_configs.listeners.append(
            lambda changed: fetchers.resize() if "num.replica.fetchers" in changed else None)
        group_configs = GroupConfigs(config, backend)
        groups.consumer.group_config = group_configs.effective
        controller = Controller(broker_id, backend, config,
                                inter_broker_listener(config, self.advertised).name)
        self.context = ctx = BrokerContext(
            broker_id=broker_id, config=config, metadata=metadata, replicas=replicas,
            purgatory=self.purgatory, admin=admin, groups=groups,
            producer_ids=producer_ids, logs=logs, metrics=self.metrics,
            broker_configs=broker_configs, group_configs=group_configs, txn=txn,
            fetch_sessions=FetchSessionCache(config["max.incremental.fetch.session.cache.slots"]),
            controller=controller)
        txn.bind(ctx)
        listener = MetadataListener(backend, publisher,
                                    inter_broker_listener(config, self.advertised).name)
        controller.known_states = lambda: listener.states
        isr = IsrManager(replicas, backend, listener, config["replica.lag.time.max.ms"],
                         self.metrics)
        offline_dirs = OfflineDirReporter(broker_id, backend, replicas, logs.failures)
        # a broker whose session expired may be a zombie: it leads nothing until the
        # store's watches tell it again what it leads
        backend.on_session_lost(replicas.fence)
        await broker_configs.start()
        await group_configs.start()
        phases.done("configs")
        await listener.start()
        phases.done("metadata and logs")
        await self._register(backend)
        phases.done("registration")

        from pybroker.server.dispatch import Dispatcher
        from pybroker.server.gc_policy import PAUSES, freeze_startup_heap

        dispatcher = Dispatcher(ctx)
        server = ConnectionServer(config, dispatcher.handle_frame, self.metrics,
                                  self.tls_contexts)
        broker_configs.listeners.append(
            lambda changed: server.quotas.reconfigure(config)
            if changed & CONNECTION_LIMIT_KEYS else None)
        try:
            async with anyio.create_task_group() as tg:
                if config["event.loop.stall.report.ms"]:  # first: it sees what follows
                    from pybroker.server.stall_report import StallReporter

                    tg.start_soon(StallReporter(
                        config["event.loop.stall.report.ms"] / 1000).run)
                # a single node is its controller before it serves (its first election
                # writes the controller epoch, on a worker thread)
                await tg.start(controller.run)
                phases.done("controller")
                for sock, item in zip(sockets, self.listeners, strict=True):
                    tg.start_soon(server.accept_loop, tg, sock, item)
                tg.start_soon(server.run)
                tg.start_soon(self._watch_signals)
                tg.start_soon(self._checkpoint_loop, logs)
                tg.start_soon(logs.run_schedulers)
                if config["metrics.port"]:
                    await tg.start(self._serve_metrics, ctx)
                tg.start_soon(groups.run)
                tg.start_soon(txn.run)
                tg.start_soon(fetchers.run)
                tg.start_soon(isr.run)
                tg.start_soon(offline_dirs.run)
                for item, port in zip(self.listeners, self.bound_ports, strict=True):
                    log.info("listening on %s://%s:%d", item.name, item.host or "0.0.0.0", port)
                # the long-lived startup heap leaves the GC's walks (tail latency)
                freeze_startup_heap()
                # timed from here: the start's collections (the startup heap, a restart's
                # logs) are over before anything is served
                PAUSES.install(growth=lambda: len(replicas.partitions) + listener.states_taken)
                phases.done("listeners")
                log.info("started in %s", phases)
                task_status.started(self.bound_ports)
                await self._stop.wait()
                if config["controlled.shutdown.enable"]:
                    # leaderships move away while this broker still serves; a partition
                    # whose ISR it was taken out of stops being fetched (Kafka's
                    # StopReplica), so its leader does not take it back in
                    replicas.shutting_down = True
                    await controlled_shutdown(broker_id, config, metadata, controller)
                tg.cancel_scope.cancel()
        finally:
            PAUSES.uninstall()  # an in-process broker's host (a test) collects as before
            log.info("cyclic GC while this broker ran: %s", PAUSES.summary())
            with anyio.CancelScope(shield=True):
                dispatcher.quotas.close()
                txn_markers.remove_marker_listener(groups.on_txn_marker)
                await txn.close()
                listener.stop()
                broker_configs.stop()
                group_configs.stop()
                await controller.resign()
                try:
                    await backend.unregister_broker(broker_id)
                except Exception as exc:
                    log.info("unregistering from the coordination store: %s", exc)

    async def _register(self, backend: CoordinationBackend) -> None:
        """Register /brokers/ids/<id>. A broker restarted right after a crash finds
        its old registration still there until the old ZooKeeper session expires.
        When that session is the one this broker's data dir names (its previous
        process wrote it there), the registration is its own previous process's: it
        is removed at once, with /controller if that process was the controller (a
        data dir serves one process at a time, so that process is gone). Any other
        holder is waited for (bounded by the session timeout), then the start fails
        as Kafka's does."""
        deadline = time.monotonic() + self.config["zookeeper.session.timeout.ms"] / 1000 * 1.5
        previous = self._previous_session()
        while True:
            try:
                await backend.register_broker(self.broker_id, self._registration())
                break
            except BrokerIdInUse:
                if previous is not None and await backend.remove_stale_registration(
                        self.broker_id, previous):
                    continue
                if time.monotonic() >= deadline:
                    raise
                log.info("broker id %d is still registered (an old session?); waiting for "
                         "it to expire", self.broker_id)
                await anyio.sleep(REGISTER_RETRY_S)
        self._save_session(backend)
        # a new session re-registers this broker: the next process must know that one
        backend.on_session_reestablished(lambda: self._save_session(backend))

    def _session_path(self) -> Path:
        return Path(self.config.log_dirs[0]) / SESSION_FILE

    def _previous_session(self) -> int | None:
        try:
            return int(self._session_path().read_text().strip(), 16)
        except (OSError, ValueError):
            return None

    def _save_session(self, backend: CoordinationBackend) -> None:
        session = backend.session_id
        if session is None:
            return
        path = self._session_path()
        try:
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_text(f"{session:x}\n")
            os.replace(temporary, path)
        except OSError as exc:  # the restart then waits for the old session, as before
            log.warning("could not record the ZooKeeper session in %s: %s. A restart of "
                        "this broker right after a crash then waits for the old session to "
                        "expire (zookeeper.session.timeout.ms); check that the log dir is "
                        "writable", path, exc)

    def _registration(self) -> BrokerRegistration:
        """/brokers/ids/<id>: this broker's advertised listeners (port 0: the bound one)
        with their security protocols, and its rack."""
        bound = self.bound_ports + [0] * len(self.advertised)
        endpoints = [(item.name, item.host or socket.getfqdn(), item.port or port)
                     for item, port in zip(self.advertised, bound, strict=False)]
        return BrokerRegistration.create(
            endpoints, security_protocols={i.name: i.security_protocol for i in self.advertised},
            rack=self.config["broker.rack"])

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                self.stop()
                return

    async def _checkpoint_loop(self, logs: LogManager) -> None:
        """Write the offset checkpoints every log.flush.offset.checkpoint.interval.ms."""
        interval = self.config["log.flush.offset.checkpoint.interval.ms"] / 1000
        while True:
            await anyio.sleep(interval)
            try:
                await logs.write_checkpoints_in_thread()  # fsyncs off the event loop
            except OSError as exc:
                log.error("writing checkpoints failed: %s. Tried again at the next interval; "
                          "until one succeeds a crash means a longer recovery. Check the log "
                          "dir (disk errors, permissions, space)", exc)

    async def _serve_metrics(self, ctx: BrokerContext, *,
                             task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """The Prometheus endpoint on metrics.port, on the first listener's host."""
        from pybroker.metrics.http import serve_metrics

        await serve_metrics(ctx, self.listeners[0].host, self.config["metrics.port"],
                            task_status=task_status)
