"""ISR changes a partition leader makes itself (Kafka's ZooKeeper-era
Partition.maybeShrinkIsr / maybeExpandIsr): a follower that has not caught up
for replica.lag.time.max.ms leaves the ISR, a follower whose log end reached
the high watermark joins it.

Each change is a conditional write of the partition's state, on the version
this leader last saw (the changes of one round go together, one store write per
batch of states, each still conditional on its own version): if the controller
moved leadership meanwhile (or this broker is a zombie whose session expired),
the write fails and nothing changes — the new state arrives through the
metadata watches instead. The controller is told through an ISR change
notification."""

from __future__ import annotations

import logging
import time
from collections.abc import Container

import anyio

from pybroker.coordination.base import CoordinationBackend, StateUpdate
from pybroker.coordination.errors import CoordinationError, StaleVersion
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.errors import KafkaError
from pybroker.metadata.listener import MetadataListener
from pybroker.metrics import BrokerMetrics
from pybroker.replica.manager import ReplicaManager
from pybroker.replica.partition import ReplicaPartition
from pybroker.server.loop_slice import LoopSlice

log = logging.getLogger(__name__)

#: a round that changes more ISRs than this logs one line for them at INFO (each
#: change at DEBUG): thousands of lines written from the loop in one go held it up
LOGGED_CHANGES = 10


class IsrManager:
    def __init__(self, replicas: ReplicaManager, backend: CoordinationBackend,
                 listener: MetadataListener, lag_time_max_ms: int,
                 metrics: BrokerMetrics) -> None:
        self.replicas = replicas
        self.backend = backend
        self.listener = listener
        self.lag_time_max_ms = lag_time_max_ms
        self.metrics = metrics
        self._expand = anyio.Event()
        #: partitions a follower outside the ISR caught up on since the last round
        self._candidates: set[ReplicaPartition] = set()
        replicas.on_isr_candidate = self._candidate
        #: expansions whose write failed without an answer: it may or may not be stored
        self._unsure: set[ReplicaPartition] = set()
        #: full rounds (every led partition checked) and candidate rounds, for tests
        self.full_rounds = 0
        self.candidate_rounds = 0

    def _candidate(self, partition: ReplicaPartition) -> None:
        self._candidates.add(partition)
        self._expand.set()

    async def run(self) -> None:
        """Check for shrinks and expansions of every led partition every half
        replica.lag.time.max.ms (as Kafka's isr-expiration task), and for the expansion
        of a partition as soon as a follower outside its ISR catches up on it (Kafka
        checks at that fetch): that round looks at those partitions alone. A round over
        every partition at each catch-up walked thousands of partitions per round, round
        after round while a restarted broker caught up (issue 25)."""
        interval = self.lag_time_max_ms / 2000
        due = time.monotonic() + interval
        while True:
            with anyio.move_on_after(max(0.0, due - time.monotonic())):
                await self._expand.wait()
            self._expand = anyio.Event()
            for partition in list(self._unsure):
                await self._settle_unsure(partition)
            full = time.monotonic() >= due
            if full:
                due = time.monotonic() + interval
                partitions = list(self.replicas.partitions.values())
                self.full_rounds += 1
            else:
                partitions = list(self._candidates)
                self.candidate_rounds += 1
            self._candidates.clear()  # a full round checks them with the rest
            changes: list[tuple[ReplicaPartition, list[int], bool]] = []
            # in slices: a full round passes over every partition (a leader may hold
            # thousands)
            pace = LoopSlice()
            for partition in partitions:
                await pace.pause_if_due()
                if not partition.is_leader:
                    continue
                shrunk = partition.isr_to_shrink(self.lag_time_max_ms) if full else None
                if shrunk is not None:
                    changes.append((partition, shrunk, False))
                    continue
                grown = partition.isr_to_expand(self._eligible(partition))
                if grown is not None:
                    changes.append((partition, grown, True))
            if changes:
                await self._write(changes)

    def _eligible(self, partition: ReplicaPartition) -> Container[int]:
        """Who may join the ISR: live brokers, except replicas a reassignment is
        removing (the controller has just taken them out of the ISR to drop them)."""
        brokers = self.listener.publisher.metadata.brokers
        assignment = self.listener.assignments.get(partition.topic)
        removing = assignment.removing_replicas.get(partition.index) if assignment else None
        if not removing:
            return brokers
        return {b for b in brokers if b not in removing}

    async def _settle_unsure(self, partition: ReplicaPartition) -> None:
        """An expansion whose write went unanswered: once the store can be read, a state
        still at the version the write was based on means it did not happen (the
        joining follower stops holding the high watermark back); any other state
        reaches the partition through the watches, which clears it too."""
        if not partition.pending_isr:
            self._unsure.discard(partition)
            return
        try:
            stored = (await self.backend.partition_states(partition.topic)).get(partition.index)
        except (CoordinationError, KafkaError):
            return
        self._unsure.discard(partition)
        if stored is not None and stored.version == partition.state_version:
            partition.clear_pending_isr()

    async def _write(self, changes: list[tuple[ReplicaPartition, list[int], bool]]) -> None:
        """Write the ISR changes of this round together: one store write per batch of
        states (each still conditional on the version this leader last saw), then one
        change notification for all of them (Kafka's leaders also sent theirs in
        batches, isr_change_notification every few seconds)."""
        updates: list[StateUpdate] = []
        planned: dict[tuple[str, int], tuple[ReplicaPartition, list[int], bool]] = {}
        pace = LoopSlice()
        for partition, isr, expand in changes:
            # a state that arrives meanwhile is seen below (or fails the write: it is
            # conditional on the version this leader knew)
            await pace.pause_if_due()
            if not partition.is_leader:
                continue
            known = self.listener.states.get((partition.topic, partition.index))
            if known is None or known.version != partition.state_version:
                continue  # a newer state is on its way through the watches
            state = known.state
            if (state.leader != partition.broker_id
                    or state.leader_epoch != partition.leader_epoch):
                continue
            new = LeaderAndIsr(controller_epoch=state.controller_epoch, leader=state.leader,
                               leader_epoch=state.leader_epoch, isr=isr,
                               leader_recovery_state=state.leader_recovery_state)
            if expand:
                partition.pending_isr = list(isr)
            updates.append(StateUpdate(partition.topic, partition.index, new, known.version))
            planned[(partition.topic, partition.index)] = (partition, isr, expand)
        if not updates:
            return
        try:
            outcomes = await self.backend.update_partition_states(updates, None)
        except CoordinationError as exc:
            # the writes may still have happened: a joining follower keeps holding the
            # high watermark back until the stored state arrives (ours or newer)
            log.warning("ISR change of %d partition(s) failed: %s; tried again at the next "
                        "check (nothing to do unless it repeats: then check ZooKeeper)",
                        len(updates), exc)
            self._unsure.update(p for p, _, expand in planned.values() if expand)
            return
        written: list[tuple[str, int]] = []
        shrunk = expanded = 0
        each = logging.INFO if len(planned) <= LOGGED_CHANGES else logging.DEBUG
        # no pause in this pass: a state arriving between the write's answer and
        # isr_changed would be overwritten by the older one written here
        for key, (partition, isr, expand) in planned.items():
            outcome = outcomes.get(key)
            if isinstance(outcome, StaleVersion):
                log.info("%s-%d: ISR change to %s lost a race (version %d); waiting for the "
                         "new state", partition.topic, partition.index, isr,
                         outcome.expected_version)
                continue
            if not isinstance(outcome, int):
                log.info("%s-%d: ISR change to %s: %s", partition.topic, partition.index, isr,
                         outcome)
                continue
            log.log(each, "%s-%d: ISR %s -> %s", partition.topic, partition.index,
                    partition.isr, isr)
            if expand:
                self.metrics.isr_expands += 1
                expanded += 1
            else:
                self.metrics.isr_shrinks += 1
                shrunk += 1
            partition.isr_changed(isr, outcome)
            written.append(key)
        if not written:
            return
        if each == logging.DEBUG:
            log.info("ISR changes written: %d shrunk, %d expanded (%d planned; each at DEBUG)",
                     shrunk, expanded, len(planned))
        try:
            await self.backend.notify_isr_change(written)
        except CoordinationError as exc:
            log.info("ISR change notification failed: %s", exc)
