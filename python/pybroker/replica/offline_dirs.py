"""A failed log dir in a cluster (Kafka's ReplicaManager.handleLogDirFailure): the
broker stops leading and following the dir's partitions at once and tells the
controller, which gives them other leaders and takes this broker out of their ISRs,
while the broker goes on serving its other dirs.

Kafka's broker writes a /log_dir_event_notification and the controller asks it which
replicas are offline (LeaderAndIsr answers KAFKA_STORAGE_ERROR). pybroker's brokers
take no LeaderAndIsr, so the broker publishes the partitions themselves, under its
current registration (coordination: report_offline_replicas); a new session means a
new registration, so they are published again then.

Until the controller has acted, the partitions answer KAFKA_STORAGE_ERROR here, which
clients retry. Publishing is retried until it succeeds: the alternative would be
partitions led by a broker that cannot serve them."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import anyio

from pybroker.coordination.base import CoordinationBackend
from pybroker.log.dir_failure import LogDirFailures
from pybroker.replica.manager import ReplicaManager

log = logging.getLogger(__name__)

#: pause before publishing again after the store refused or was unreachable
RETRY_S = 0.5


class OfflineDirReporter:
    def __init__(self, broker_id: int, backend: CoordinationBackend,
                 replicas: ReplicaManager, failures: LogDirFailures) -> None:
        self.broker_id = broker_id
        self.backend = backend
        self.replicas = replicas
        self.failures = failures
        self._wake = anyio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        failures.listeners.append(self._dir_failed)

    def _dir_failed(self, directory: Path) -> None:
        """Any thread (a flush on a worker thread finds most failures)."""
        loop = self._loop
        if loop is None:
            return  # run() looks at the failed dirs when it starts
        try:
            loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:  # the loop is closed: the broker is stopping
            pass

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        handle = self.backend.on_session_reestablished(self._wake.set)
        try:
            if self.failures.offline:
                self._wake.set()
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                offline = self.replicas.take_offline()
                if offline:
                    await self._publish(offline)
        finally:
            self._loop = None
            handle.cancel()

    async def _publish(self, offline: list[tuple[str, int]]) -> None:
        while True:
            try:
                epoch = (await self.backend.broker_epochs()).get(self.broker_id)
                if epoch is not None:
                    await self.backend.report_offline_replicas(self.broker_id, epoch, offline)
                    log.warning("told the controller that %d partition(s) on failed log "
                                "dirs are offline here; they get other leaders while this "
                                "broker serves the rest. Restart it once the disk is fixed",
                                len(offline))
                    return
            except Exception as exc:
                log.warning("could not tell the controller of the partitions on failed "
                            "log dirs (%s); trying again. Nothing to do if ZooKeeper is "
                            "reachable again soon", exc)
            await anyio.sleep(RETRY_S)
