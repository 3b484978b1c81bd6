"""The controller: one broker, elected through the coordination store, decides
partition leadership for the whole cluster (Kafka's ZooKeeper-era
KafkaController). On a single node it is the only candidate, so the single
node runs the same controller as a cluster: a controller of one.

How brokers learn its decisions: through the store's watches, not Kafka's
LeaderAndIsr / UpdateMetadata requests. The controller writes each partition's
state (leader, leader epoch, ISR) to the store; every broker watches those
states and the topic assignments and applies them (metadata/listener.py).
That keeps one channel for every change — including the ISR changes partition
leaders write themselves — at the cost of a watch per partition.

Fencing: every controller write carries its ControllerLease and runs as one
transaction with a check on the controller epoch's version, so a deposed
controller (say, paused past its session) cannot overwrite its successor.
ControllerMoved from any write ends this broker's term at once.

Duties while elected:
- a topic's partitions without state get one (leader = first live replica);
- when brokers die or return, partitions they led get a new leader from the
  live ISR (epoch + 1), dead followers leave the ISR, offline partitions get a
  leader back when an ISR member returns;
- topics marked for deletion are deleted;
- ISR change notifications are consumed (brokers see the state znodes directly)."""

from __future__ import annotations

import logging
import uuid

import anyio
import msgspec

from pybroker.config import BrokerConfig
from pybroker.controller import election
from pybroker.coordination.base import (
    CoordinationBackend,
    ControllerLease,
    TopicAssignment,
    WatchHandle,
)
from pybroker.coordination.errors import ControllerMoved, StaleVersion
from pybroker.errors import KafkaError

log = logging.getLogger(__name__)


#: pause before reconciling a partition whose state changed under the controller
RETRY_DELAY_S = 0.1


class Controller:
    def __init__(self, broker_id: int, backend: CoordinationBackend, config: BrokerConfig
                 ) -> None:
        self.broker_id = broker_id
        self.backend = backend
        self.config = config
        self.lease: ControllerLease | None = None
        self._duties: list[WatchHandle] = []
        self._handles: list[WatchHandle] = []
        self._live: set[int] = set()
        self._topics: dict[str, TopicAssignment] = {}
        #: topics to reconcile, worked off by run() one at a time
        self._pending: set[str] = set()
        self._wake = anyio.Event()

    @property
    def is_active(self) -> bool:
        return self.lease is not None

    async def run(self) -> None:
        """Stand for election now and whenever the controller goes away; while
        elected, reconcile partition states as events arrive. Until cancelled."""
        self._handles.append(await self.backend.watch_controller(self._controller_changed))
        self._handles.append(self.backend.on_session_lost(self._resign_locally))
        self._handles.append(self.backend.on_session_reestablished(self._try_elect))
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                while self._pending and self.lease is not None:
                    name = min(self._pending)
                    self._pending.discard(name)
                    await self._reconcile(name)
        finally:
            for handle in self._handles:
                handle.cancel()
            self._handles.clear()

    async def resign(self) -> None:
        """Give up the controllership (clean shutdown), so another broker takes over
        without waiting for this one's session to expire."""
        lease = self.lease
        self._resign_locally()
        if lease is not None:
            try:
                await self.backend.resign(lease)
            except Exception as exc:  # the store may be unreachable on shutdown
                log.info("resigning as controller: %s", exc)

    def _enqueue(self, names: list[str]) -> None:
        self._pending.update(names)
        if names:
            self._wake.set()

    async def _controller_changed(self, controller: int | None) -> None:
        if controller is None:
            await self._try_elect()
        elif controller != self.broker_id and self.lease is not None:
            log.warning("broker %d is controller now; this broker stops acting as one",
                        controller)
            self._resign_locally()

    async def _try_elect(self) -> None:
        if self.lease is not None:
            return
        lease = await self.backend.try_elect_controller(self.broker_id)
        if lease is None:
            return
        log.info("broker %d is the controller (epoch %d)", self.broker_id, lease.epoch)
        self.lease = lease
        self._live = set()
        self._topics = {}
        self._duties = [
            await self.backend.watch_brokers(self._brokers_changed),
            await self.backend.watch_topics(self._topics_changed),
            await self.backend.watch_topic_deletions(self._deletions_changed),
            await self.backend.watch_isr_changes(self._isr_changed),
        ]

    def _resign_locally(self) -> None:
        if self.lease is not None:
            log.info("broker %d stops acting as controller (epoch %d)", self.broker_id,
                     self.lease.epoch)
        self.lease = None
        for handle in self._duties:
            handle.cancel()
        self._duties = []
        self._pending.clear()

    # --- events (run by the store's watch dispatcher, one at a time) ------------------
    def _brokers_changed(self, brokers: dict[int, object]) -> None:
        live = set(brokers)
        gone, back = self._live - live, live - self._live
        self._live = live
        if gone or back:
            log.info("controller: live brokers %s (gone %s, new %s)", sorted(live),
                     sorted(gone), sorted(back))
            self._enqueue(list(self._topics))

    def _topics_changed(self, topics: dict[str, TopicAssignment]) -> None:
        changed = [name for name, a in topics.items() if self._topics.get(name) != a]
        self._topics = dict(topics)
        self._enqueue(changed)

    async def _deletions_changed(self, names: set[str]) -> None:
        lease = self.lease
        if lease is None:
            return
        for name in sorted(names):
            try:
                await self.backend.delete_topic(name, lease)
                log.info("controller: deleted topic %s", name)
            except ControllerMoved:
                self._resign_locally()
                return
            except KafkaError as exc:
                log.info("controller: deleting topic %s: %s", name, exc)

    async def _isr_changed(self) -> None:
        await self.backend.consume_isr_changes()

    # --- the partition state machine --------------------------------------------------
    async def _reconcile(self, name: str) -> None:
        """Bring one topic's partition states in line with the live brokers."""
        lease = self.lease
        assignment = self._topics.get(name)
        if lease is None or assignment is None:
            return
        try:
            stale = await self._reconcile_topic(assignment, lease)
        except ControllerMoved:
            log.warning("controller epoch moved on; broker %d stops acting as controller",
                        self.broker_id)
            self._resign_locally()
            return
        except KafkaError as exc:  # deleted under us
            log.info("controller: topic %s: %s", name, exc)
            return
        if stale:
            # a leader changed its ISR meanwhile: read the states again
            await anyio.sleep(RETRY_DELAY_S)
            self._enqueue([name])

    async def _reconcile_topic(self, assignment: TopicAssignment, lease: ControllerLease
                               ) -> bool:
        """Write the states the topic's partitions should have; True when one had
        changed under the controller (try again)."""
        if assignment.topic_id == uuid.UUID(int=0):
            # a topic znode written before topic ids (Kafka < 2.8): the controller gives
            # it one, once (Kafka's KafkaController.setTopicIds); the write is versioned
            # and fenced, so one id wins, and the topics watch brings it to every broker
            await self.backend.set_partition_assignment(
                msgspec.structs.replace(assignment, topic_id=uuid.uuid4()), lease)
            log.info("controller: topic %s had no topic id; assigned one", assignment.name)
        states = await self.backend.partition_states(assignment.name)
        unclean: bool | None = None
        new = {}
        stale = False
        for index, replicas in sorted(assignment.partitions.items()):
            current = states.get(index)
            if current is None:
                state = election.initial_state(replicas, self._live, lease.epoch)
                if state is not None:
                    new[index] = state
                continue
            if unclean is None:
                unclean = await self._unclean(assignment.name)
            changed = election.after_broker_change(replicas, current.state, self._live,
                                                   lease.epoch, unclean)
            if changed is None:
                continue
            try:
                await self.backend.update_partition_state(assignment.name, index, changed,
                                                          current.version, lease)
                log.info("controller: %s-%d leader %d epoch %d isr %s", assignment.name,
                         index, changed.leader, changed.leader_epoch, changed.isr)
            except StaleVersion:
                stale = True
        if new:
            try:
                await self.backend.create_partition_states(assignment.name, new, lease)
            except StaleVersion:
                stale = True
        return stale

    async def _unclean(self, topic: str) -> bool:
        value = (await self.backend.topic_configs(topic)).get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config["unclean.leader.election.enable"])
        return value.strip().lower() == "true"
