"""The broker: wires config, metadata store, logs and the network together, and
owns the topic operations (create, delete, grow) that touch both the store and
the logs."""

from __future__ import annotations

import logging
import signal
import socket
from typing import Any

import anyio

from pybroker.config import BrokerConfig, ConfigError, parse_topic_config
from pybroker.coordination.base import TopicRecord, validate_topic_name
from pybroker.coordination.embedded import EmbeddedStore
from pybroker.errors import ErrorCode, KafkaError
from pybroker.group import GroupCoordinator
from pybroker.log.manager import LogManager, topic_config
from pybroker.log.partition import Partition
from pybroker.metrics import BrokerMetrics
from pybroker.producer.ids import ProducerIdAllocator
from pybroker.server.acceptor import accept_loop
from pybroker.server.listeners import bind_listener, parse_listeners

log = logging.getLogger(__name__)

#: no request may create more partitions than this for one topic (a guard, not Kafka's)
PARTITIONS_PER_TOPIC_MAX = 10000


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
        self.logs = LogManager(config, self.store.cluster_id)
        self.producer_ids = ProducerIdAllocator(self.store)
        self.groups = GroupCoordinator.for_broker(self)
        self.bound_ports: list[int] = []
        self.metrics = BrokerMetrics()
        self._stop = anyio.Event()

    # --- addresses ---
    @property
    def advertised_host_port(self) -> tuple[str, int]:
        listener = self.advertised[0]
        host = listener.host or socket.getfqdn()
        port = listener.port or (self.bound_ports[0] if self.bound_ports else 0)
        return host, port

    # --- topics ---
    def topic(self, name: str) -> TopicRecord | None:
        return self.store.topics().get(name)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.logs.get(topic, index)

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicRecord | None:
        validate_topic_name(name)
        if name in self.store.topics():
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        self._check_collision(name)
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            for replicas in assignments:
                if not replicas or any(b != self.broker_id for b in replicas) or len(
                        set(replicas)) != len(replicas):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Invalid replica assignment {replicas}")
            num_partitions = len(assignments)
            replication_factor = len(assignments[0])
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions must be larger than 0.")
        if num_partitions > PARTITIONS_PER_TOPIC_MAX:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions must be at most {PARTITIONS_PER_TOPIC_MAX}.")
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0.")
        if replication_factor > 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): "
                "The target replication factor of "
                f"{replication_factor} cannot be reached because only 1 broker(s) are registered.",
            )
        checked = self._validate_topic_configs(configs or {})
        if validate_only:
            return None
        record = self.store.create_topic(name, num_partitions, replication_factor, checked)
        for index in range(num_partitions):
            self.logs.open_partition(record, index)
        log.info("created topic %s with %d partitions", name, num_partitions)
        return record

    def auto_create_topic(self, name: str) -> TopicRecord | None:
        """Create a topic a client asked for, when auto.create.topics.enable allows."""
        if not self.config["auto.create.topics.enable"]:
            return None
        return self.create_topic(name)

    def delete_topic(self, name: str) -> None:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        if name not in self.store.topics():
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        self.logs.delete_topic(name)
        self.store.delete_topic(name)
        log.info("deleted topic %s", name)

    def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None,
        validate_only: bool = False,
    ) -> None:
        record = self.topic(name)
        if record is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"The topic '{name}' does not exist.")
        current = len(record.partitions)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than "
                             f"the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic already has {current} partitions.")
        if count > PARTITIONS_PER_TOPIC_MAX:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions must be at most {PARTITIONS_PER_TOPIC_MAX}.")
        if assignments is not None:
            if len(assignments) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {count - current} but "
                                 f"{len(assignments)} assignments provided.")
            for replicas in assignments:
                if any(b != self.broker_id for b in replicas) or not replicas:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Invalid replica assignment {replicas}")
        if validate_only:
            return
        record = self.store.add_partitions(name, count)
        for index in range(current, count):
            self.logs.open_partition(record, index)

    def _check_collision(self, name: str) -> None:
        """Kafka forbids topics differing only by '.' vs '_' (metric names collide)."""
        folded = name.replace(".", "_")
        for other in self.store.topics():
            if other.replace(".", "_") == folded:
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{name}' collides with existing topic: {other}",
                )

    def _validate_topic_configs(self, configs: dict[str, str | None]) -> dict[str, str]:
        checked: dict[str, str] = {}
        for key, value in configs.items():
            if value is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Null value not supported for topic configs: {key}")
            try:
                parse_topic_config(key, value)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc
            checked[key] = value
        return checked

    def alter_topic_configs(self, name: str, configs: dict[str, str | None],
                            validate_only: bool = False) -> None:
        """Replace the topic's overrides (AlterConfigs semantics): validated,
        persisted in the metadata store, applied to the open logs."""
        if self.topic(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {name} does not exist")
        checked = self._validate_topic_configs(configs)
        if validate_only:
            return
        record = self.store.set_topic_configs(name, checked)
        self.logs.update_topic_config(record)
        log.info("topic %s configs set to %s", name, checked)

    def topic_config(self, record: TopicRecord) -> Any:
        return topic_config(self.config, record)

    # --- lifecycle ---
    def startup(self) -> None:
        self.logs.startup(self.store.topics())
        self.groups.load()

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen, accept and serve connections until stop() or a signal."""
        from pybroker.server.dispatch import Dispatcher

        dispatcher = Dispatcher(self)
        sockets = [bind_listener(listener) for listener in self.listeners]
        self.bound_ports = [s.getsockname()[1] for s in sockets]
        try:
            async with anyio.create_task_group() as tg:
                for sock in sockets:
                    tg.start_soon(accept_loop, tg, sock, self.config, dispatcher.handle_frame,
                                  self.metrics)
                tg.start_soon(self._watch_signals, tg)
                tg.start_soon(self._checkpoint_loop)
                tg.start_soon(self.logs.run_schedulers)
                if self.config["metrics.port"]:
                    await tg.start(self._serve_metrics)
                tg.start_soon(self.groups.run)
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

        await serve_metrics(self, self.listeners[0].host, self.config["metrics.port"],
                            task_status=task_status)

