"""Keeps this broker's metadata in step with the coordination store: it
watches the live brokers, the controller, the topics, their configs and every
partition's state, and hands each change to the publisher (the metadata cache,
then the replica layer). The same listener runs on a single node over the
embedded store and on every broker of a cluster over ZooKeeper."""

from __future__ import annotations

import logging
import time
import uuid

import anyio

from pybroker.coordination.base import (
    CoordinationBackend,
    PartitionState,
    TopicAssignment,
    TopicRecord,
    VersionedState,
    WatchHandle,
)
from pybroker.coordination.znodes import BrokerRegistration
from pybroker.metadata.cache import BrokerEndpoint
from pybroker.metadata.publisher import MetadataPublisher
from pybroker.server.loop_slice import LoopSlice

log = logging.getLogger(__name__)

NO_LEADER = -1
#: a batch of at least this many partition state changes logs a line at INFO when
#: applied (a controller's batch: how long this broker took), smaller ones at DEBUG
LOGGED_BATCH = 1000


class MetadataListener:
    def __init__(self, backend: CoordinationBackend, publisher: MetadataPublisher,
                 listener_name: str) -> None:
        self.backend = backend
        self.publisher = publisher
        #: which of a broker's registered endpoints clients are given
        self.listener_name = listener_name
        self.assignments: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[tuple[str, int], VersionedState] = {}
        #: partition state changes taken so far (it only grows): what the broker keeps
        #: of each is new objects, which the cyclic GC walks until they are frozen
        #: (server/gc_policy.py)
        self.states_taken = 0
        self._handles: list[WatchHandle] = []

    async def start(self) -> None:
        watch = self.backend
        # the states before the topics: the first read of the states only keeps them
        # (no topic is known yet), and the first read of the topics then hands each
        # topic to the replica layer with its states, once. The other way round, a
        # restart applied every topic twice: first without leaders (its logs opened, every
        # partition a follower of no one), then again as the states arrived
        self._handles = [
            await watch.watch_brokers(self._brokers_changed),
            await watch.watch_controller(self._controller_changed),
            await watch.watch_partition_states(self._states_changed, whole_batches=True),
            await watch.watch_topics(self._topics_changed),
            await watch.watch_topic_configs(self._configs_changed),
            watch.on_session_reestablished(self._session_reestablished),
        ]

    def stop(self) -> None:
        for handle in self._handles:
            handle.cancel()
        self._handles = []

    # --- watch callbacks ------------------------------------------------------------
    def _brokers_changed(self, brokers: dict[int, BrokerRegistration]) -> None:
        endpoints = []
        for broker_id, registration in sorted(brokers.items()):
            endpoint = self._endpoint(broker_id, registration)
            if endpoint is not None:
                endpoints.append(endpoint)
        self.publisher.brokers_changed(endpoints)

    def _endpoint(self, broker_id: int, registration: BrokerRegistration
                  ) -> BrokerEndpoint | None:
        try:
            parsed = registration.parsed_endpoints()
        except ValueError as exc:
            log.warning("broker %d registered an endpoint that cannot be read (%s): clients "
                        "are not told of it until it registers a valid one; check that "
                        "broker's listeners and advertised.listeners", broker_id, exc)
            return None
        chosen = next((e for e in parsed if e.listener_name == self.listener_name),
                      parsed[0] if parsed else None)
        if chosen is None:
            return None
        rack = registration.rack if isinstance(registration.rack, str) else None
        return BrokerEndpoint(broker_id, chosen.host, chosen.port, rack,
                              tuple((e.listener_name, e.host, e.port) for e in parsed))

    def _controller_changed(self, controller: int | None) -> None:
        self.publisher.metadata.set_controller(-1 if controller is None else controller)

    async def _topics_changed(self, topics: dict[str, TopicAssignment]) -> None:
        for name in [n for n in self.assignments if n not in topics]:
            del self.assignments[name]
            self.configs.pop(name, None)
            for key in [k for k in self.states if k[0] == name]:
                del self.states[key]
            self.publisher.topic_deleted(name)
        changed = [name for name, assignment in topics.items()
                   if self.assignments.get(name) != assignment]
        if not changed:
            return
        # the configs of topics new here, read side by side: one round trip each, one
        # after another, was 100 round trips before a restart's first log opened
        read = await self._read_configs([name for name in changed if name not in self.configs])
        for name in changed:
            if name not in self.configs:  # the configs watch may have told us meanwhile
                self.configs[name] = read.get(name, {})
            self.assignments[name] = topics[name]
        if len(changed) == 1:
            await self._publish(changed[0])
            return
        # every changed topic in one pass of the replica layer (a restart's first read
        # is every topic): the next topic's logs open on the worker threads while one
        # topic is applied on the loop, where topic after topic left the threads idle
        # while the loop applied each, and the loop idle while they opened the next
        records = []
        pace = LoopSlice()
        for name in changed:
            await pace.pause_if_due()
            if name in self.assignments:  # not deleted during a pause
                records.append(self._record(name))
        await self.publisher.topics_changed(records)

    async def _read_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        """The config overrides of each topic named, read concurrently."""
        read: dict[str, dict[str, str]] = {}
        failed: list[Exception] = []

        async def one(name: str) -> None:
            try:
                read[name] = await self.backend.topic_configs(name)
            except Exception as exc:  # noqa: BLE001 - raised below, as a read one at a time
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(one, name)
        if failed:  # the watch's caller handles it as before (not an exception group)
            raise failed[0]
        return read

    def _configs_changed(self, name: str, configs: dict[str, str]) -> None:
        if name not in self.assignments:
            return
        self.configs[name] = dict(configs)
        self.publisher.topic_configs_changed(self._record(name)[0])

    async def _states_changed(self, batch: dict[str, dict[int, VersionedState | None]]
                              ) -> None:
        """Partition states changed, of one topic or many (seen together: a
        controller's batch, say every leadership of a broker in controlled shutdown):
        each topic is applied once for all of its changes, and the topics in one pass
        (the replica layer records the leader epochs of every takeover together). The
        replica layer applies the changed partitions alone: a controlled shutdown
        changes a third of a topic's states at a time (its leaderships, then its ISRs)."""
        started = time.monotonic()
        changed = 0
        for topic, changes in batch.items():
            changed += len(changes)
            self.states_taken += len(changes)
            for partition, state in changes.items():
                if state is None:
                    self.states.pop((topic, partition), None)
                else:
                    self.states[(topic, partition)] = state
        # the records of every changed topic (thousands of partitions after a controlled
        # shutdown or a restart) are built in slices: one pass held the loop for
        # hundreds of ms on a loaded machine (issue 25); a topic deleted during a
        # pause is left out
        records = []
        pace = LoopSlice()
        for name in batch:
            await pace.pause_if_due()
            if name in self.assignments:
                records.append(self._record(name))
        if records:
            await self.publisher.topics_changed(
                records, {name: list(changes) for name, changes in batch.items()})
        log.log(logging.INFO if changed >= LOGGED_BATCH else logging.DEBUG,
                "metadata: applied %d partition state change(s) of %d topic(s) in %.3f s",
                changed, len(batch), time.monotonic() - started)

    async def _session_reestablished(self) -> None:
        """A new session after a lost one (run after the watches were re-read). The
        replica layer fenced every partition when the session was lost; the watches
        report only states that changed meanwhile, so the others are handed over
        again here, or this broker would never lead or follow them again."""
        for name in list(self.assignments):
            if name in self.assignments:
                await self._publish(name)

    # --- records ----------------------------------------------------------------------
    async def _publish(self, name: str) -> None:
        record, versions = self._record(name)
        await self.publisher.topic_changed(record, versions)

    def _record(self, name: str) -> tuple[TopicRecord, list[int]]:
        """The topic as the cache and the replica layer see it: partitions without
        a state yet have no leader."""
        assignment = self.assignments[name]
        partitions = []
        versions = []
        for index in range(len(assignment.partitions)):
            replicas = list(assignment.partitions.get(index, []))
            known = self.states.get((name, index))
            if known is None:
                partitions.append(PartitionState(NO_LEADER, -1, replicas, []))
                versions.append(-1)
            else:
                partitions.append(PartitionState(known.state.leader, known.state.leader_epoch,
                                                 replicas, list(known.state.isr)))
                versions.append(known.version)
        topic_id = assignment.topic_id if isinstance(assignment.topic_id, uuid.UUID) \
            else uuid.UUID(str(assignment.topic_id))
        return TopicRecord(name, topic_id, partitions, dict(self.configs.get(name, {}))), versions
