"""The broker: wires config, metadata store, logs, replicas and the network
together, and runs them until it is stopped. A single node is a cluster of one:
it registers itself as the only broker and controller, and its topic changes
reach the metadata cache and the replica layer through the same publisher as
a cluster's would."""

from __future__ import annotations

import logging
import signal
import socket
from typing import Any

import anyio

from pybroker.admin.topics import TopicAdmin
from pybroker.config import BrokerConfig, ConfigError
from pybroker.coordination.embedded import EmbeddedStore
from pybroker.group import GroupCoordinator
from pybroker.handlers.context import BrokerContext
from pybroker.log.manager import LogManager
from pybroker.metadata.cache import BrokerEndpoint, MetadataCache
from pybroker.metadata.publisher import MetadataPublisher
from pybroker.metrics import BrokerMetrics
from pybroker.producer.ids import ProducerIdAllocator
from pybroker.purgatory import Purgatory
from pybroker.replica.fetcher import ReplicaFetcherManager
from pybroker.replica.manager import ReplicaManager
from pybroker.server.acceptor import ConnectionServer
from pybroker.server.listeners import bind_listener, parse_listeners

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.listeners = parse_listeners(config["listeners"])
        if not self.listeners:
            raise ConfigError("no listeners configured")
        advertised = config["advertised.listeners"]
        self.advertised = parse_listeners(advertised) if advertised else list(self.listeners)
        self.store = EmbeddedStore(config.log_dirs[0], self.broker_id)
        self.metadata = MetadataCache(self.store.cluster_id)
        self.purgatory = Purgatory()
        self.logs = LogManager(config, self.store.cluster_id)
        self.fetchers = ReplicaFetcherManager(self.broker_id, self.metadata, config)
        self.replicas = ReplicaManager(self.broker_id, self.logs, self.purgatory, self.fetchers)
        self.publisher = MetadataPublisher(self.metadata, self.replicas)
        self.admin = TopicAdmin(config, self.store, self.metadata,
                                publish=self.publisher.topic_changed,
                                unpublish=self.publisher.topic_deleted,
                                publish_configs=self.publisher.topic_configs_changed)
        self.producer_ids = ProducerIdAllocator(self.store)
        self.groups = GroupCoordinator.for_broker(config, self.metadata, self.replicas,
                                                  self.admin)
        self.bound_ports: list[int] = []
        self.metrics = BrokerMetrics()
        self.context = BrokerContext(
            broker_id=self.broker_id, config=config, metadata=self.metadata,
            replicas=self.replicas, purgatory=self.purgatory, admin=self.admin,
            groups=self.groups, producer_ids=self.producer_ids, logs=self.logs,
            metrics=self.metrics)
        self._stop = anyio.Event()
        self._register(self.advertised[0].port)

    def _register(self, bound_port: int) -> None:
        """This broker as the cluster's only member and its controller."""
        listener = self.advertised[0]
        host = listener.host or socket.getfqdn()
        self.metadata.set_brokers([BrokerEndpoint(self.broker_id, host,
                                                  listener.port or bound_port)])
        self.metadata.set_controller(self.broker_id)

    # --- lifecycle ---
    def startup(self) -> None:
        self.logs.startup()
        for record in self.store.topics().values():
            self.publisher.topic_changed(record)
        self.groups.load()

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen, accept and serve connections until stop() or a signal."""
        from pybroker.server.dispatch import Dispatcher

        dispatcher = Dispatcher(self.context)
        server = ConnectionServer(self.config, dispatcher.handle_frame, self.metrics)
        sockets = [bind_listener(listener) for listener in self.listeners]
        self.bound_ports = [s.getsockname()[1] for s in sockets]
        self._register(self.bound_ports[0])
        try:
            async with anyio.create_task_group() as tg:
                for sock in sockets:
                    tg.start_soon(server.accept_loop, tg, sock)
                tg.start_soon(server.run)
                tg.start_soon(self._watch_signals, tg)
                tg.start_soon(self._checkpoint_loop)
                tg.start_soon(self.logs.run_schedulers)
                if self.config["metrics.port"]:
                    await tg.start(self._serve_metrics)
                tg.start_soon(self.groups.run)
                tg.start_soon(self.fetchers.run)
                for listener, port in zip(self.listeners, self.bound_ports, strict=True):
                    log.info("listening on %s://%s:%d", listener.name, listener.host or "0.0.0.0",
                             port)
                task_status.started(self.bound_ports)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            for sock in sockets:
                sock.close()

    def stop(self) -> None:
        self._stop.set()

    def shutdown(self) -> None:
        """Flush logs and write checkpoints and the clean-shutdown marker."""
        self.logs.shutdown()
        log.info("shut down cleanly")

    async def _watch_signals(self, tg: anyio.abc.TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                self.stop()
                return

    async def _checkpoint_loop(self) -> None:
        """Write the offset checkpoints every log.flush.offset.checkpoint.interval.ms."""
        interval = self.config["log.flush.offset.checkpoint.interval.ms"] / 1000
        while True:
            await anyio.sleep(interval)
            try:
                self.logs.write_checkpoints()
            except OSError as exc:
                log.error("writing checkpoints failed: %s", exc)

    async def _serve_metrics(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """The Prometheus endpoint on metrics.port, on the first listener's host."""
        from pybroker.metrics.http import serve_metrics

        await serve_metrics(self.context, self.listeners[0].host, self.config["metrics.port"],
                            task_status=task_status)

