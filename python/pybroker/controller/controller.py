"""The controller: one broker, elected through the coordination store, decides
partition leadership for the whole cluster (Kafka's ZooKeeper-era
KafkaController). On a single node it is the only candidate, so the single
node runs the same controller as a cluster: a controller of one.

How brokers learn its decisions: through the store's watches, not Kafka's
LeaderAndIsr / UpdateMetadata requests. The controller writes each partition's
state (leader, leader epoch, ISR) to the store; every broker watches those
states and the topic assignments and applies them (metadata/listener.py).
That keeps one channel for every change — including the ISR changes partition
leaders write themselves. On ZooKeeper 3.6+ a broker holds one persistent
recursive watch per topic and reads the states it reports changed together, in
multiReads (coordination/zkstatewatch.py); a watch is never re-armed by a read, so
no change goes unreported between a notification and its re-read, and after a
reconnect or a new session everything is read again. A broker only applies what it
read; it never infers a state from a notification.

Fencing: every controller write carries its ControllerLease and runs as one
transaction with a check on the controller epoch's version, so a deposed
controller (say, paused past its session) cannot overwrite its successor.
ControllerMoved from any write ends this broker's term at once.

Batches (issue 25): the controller decides many partitions at once — every topic
due after a broker's death or return, every partition of a broker in controlled
shutdown — reading their states together (ZooKeeper multiReads) and writing the
changed ones one multi per batch of states, the batches sent together (Kafka 1.1's
batched, pipelined state changes). A batch is only a packaging: each state in it is
still a conditional write on the version it was decided from, and every multi checks
the controller epoch first (the multi's own coding, coordination/zkstatemulti.py,
puts that check before the writes, as fenced_multi does). A multi fails as a whole
when one state's version moved on; the others are written again without it, and the
stale one is read and decided again, as a single write's StaleVersion always was.
A controlled shutdown writes the leaderships first and the ISR-only changes after (Kafka's
order), and decides from the states its own broker's metadata listener holds, with their
versions, instead of reading them all back: a state held stale is a version race like
any other (its write fails, it is read and decided again), so what is written is always
decided from the state it replaces.

Duties while elected:
- a topic's partitions without state get one (leader = first live replica);
- when brokers die or return, partitions they led get a new leader from the
  live ISR (epoch + 1), dead followers leave the ISR, offline partitions get a
  leader back when an ISR member returns;
- topics marked for deletion are deleted;
- ISR change notifications are consumed (brokers see the state znodes directly);
  a partition being reassigned is checked again then, and its move completed
  once its target replicas are all in the ISR (controller/reassignment.py);
- the admin requests only a controller serves: AlterPartitionReassignments,
  ListPartitionReassignments, ElectLeaders and ControlledShutdown (methods
  below, called by their handlers), plus the automatic preferred-leader
  rebalance (auto.leader.rebalance.enable).

Noticing a death before the session expires (issue 25). ZooKeeper removes a
killed broker's registration only when its session expires
(zookeeper.session.timeout.ms after the last heartbeat); until then its
partitions would have no working leader and it would stay in every ISR it was
in, holding up acks=all. But a killed process's sockets are closed by its
kernel at once, and a new connection to its listener is refused: nothing
listens there any more. So the controller holds an idle connection to every
other broker's inter-broker listener (controller/liveness.py) and, when a
broker's listener refuses connections, fences that broker's epoch: it counts
as dead (new leaders for what it led, out of every ISR) until its registration
goes, a new one (a new epoch) replaces it, or its listener accepts connections
again. The other brokers watch the
controller's listener the same way and, when it is gone, delete /controller
(in one transaction with a check that /controller_epoch has not moved) so that
one of them is elected at once. A broker that comes back under a new epoch
without the controller having seen it go ("bounced") first loses its old
incarnation's ISR places and leaderships, as Kafka's controller does. A
restarted broker removes the registration its own previous process left
(broker.py), instead of waiting for that session to expire. A new controller
looks at every registered broker's listener before its first pass over the
partitions (bounded by FIRST_LOOK_WAIT_S), so a broker killed together with the
old controller, or being the old controller, is out of that first pass already:
every state is read once, not once to find nothing to do and again when the
broker is found gone a moment later.

Why this cannot make two leaders acknowledge writes for one partition, even
when the conclusion is wrong (a broker fenced while alive, a controller
removed while alive):
- Every election reads the partition's state and writes the new one with a
  conditional write on its version, in a transaction checking the controller
  epoch (alone or in a batch: the multi applies all of its writes or none): it
  elects from the ISR as stored, never from a view of it, and a deposed
  controller's write fails (ControllerMoved). The new leader epoch is the old
  one + 1.
- A leader acknowledges an acks=all write only once its high watermark passed
  it, and the high watermark is the smallest log end over the ISR it holds.
  That ISR is the stored one (a leader applies its own ISR change only after the
  conditional write succeeded). So a new leader, being a member of that ISR,
  had already fetched everything the old leader ever acknowledged; it stopped
  fetching from the old leader when it took over, so from then on the old
  leader's high watermark cannot pass what the new leader holds.
- The old leader cannot take the new leader out of its ISR to move on alone:
  that is a write on the state version it last saw, which the election changed,
  so it fails, and the new state reaches it through the watches (it follows,
  truncating what it appended but never committed; its acks=all waiters are
  answered NOT_LEADER_OR_FOLLOWER, or REQUEST_TIMED_OUT at their timeout).
- Whatever triggered the election (session expiry, a refused listener, a
  restart) only decides when it happens, never from which replicas it picks;
  a wrong trigger costs a needless leader change, never an acknowledged record.
  The same holds for a deleted /controller: the next controller bumps the
  controller epoch, which fences every write of the previous one.
What the faster detection does not cover: a paused or unreachable broker (its
kernel still accepts connections, or nothing answers at all) is noticed only
when its session expires, as before; tests/cluster/test_zombie.py,
test_zookeeper_loss.py and test_partitioned_leader.py cover those."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping

import anyio
import msgspec
from anyio.abc import TaskStatus

from pybroker.config import BrokerConfig
from pybroker.controller import election, reassignment
from pybroker.controller.liveness import Endpoint, LivenessWatch
from pybroker.coordination.base import (
    CoordinationBackend,
    ControllerLease,
    StateOutcome,
    StateUpdate,
    TopicAssignment,
    VersionedState,
    WatchHandle,
)
from pybroker.coordination.errors import ControllerMoved, CoordinationError, StaleVersion
from pybroker.coordination.znodes import BrokerRegistration, LeaderAndIsr, OfflineReplicas
from pybroker.errors import ErrorCode, KafkaError
from pybroker.server.loop_slice import LoopSlice

log = logging.getLogger(__name__)


#: pause before reconciling a partition whose state changed under the controller
RETRY_DELAY_S = 0.1
#: partitions per chunk of a reconcile pass: each chunk's states are decided and written
#: as soon as they are read (about one write multi, zktopics.STATE_OPS_PER_MULTI)
RECONCILE_CHUNK_PARTITIONS = 1000
#: a batch of more state writes than this logs each state at DEBUG and one line at
#: INFO for them
LOGGED_STATES = 10
#: tries of an admin-requested state change that keeps losing version races
WRITE_RETRIES = 10
#: how long a new controller's first pass waits for its first look at every broker's
#: listener (a refused or accepted connection takes a round trip; only a host that does
#: not answer at all takes longer, and proves nothing anyway)
FIRST_LOOK_WAIT_S = 1.0
PREFERRED = 0
UNCLEAN = 1

Partition = tuple[str, int]


def _chunks(assignments: list[TopicAssignment], partitions: int
            ) -> list[list[TopicAssignment]]:
    """Whole topics in order, a new chunk begun once one holds `partitions` partitions."""
    chunks: list[list[TopicAssignment]] = [[]]
    count = 0
    for assignment in assignments:
        if chunks[-1] and count >= partitions:
            chunks.append([])
            count = 0
        chunks[-1].append(assignment)
        count += len(assignment.partitions)
    return [c for c in chunks if c]


class Controller:
    def __init__(self, broker_id: int, backend: CoordinationBackend, config: BrokerConfig,
                 listener_name: str = "PLAINTEXT") -> None:
        self.broker_id = broker_id
        self.backend = backend
        self.config = config
        #: the inter-broker listener: where another broker's process is looked for
        self.listener_name = listener_name
        self.lease: ControllerLease | None = None
        self._duties: list[WatchHandle] = []
        self._handles: list[WatchHandle] = []
        #: registered brokers that may lead and be in ISRs (registered minus fenced)
        self._live: set[int] = set()
        #: every registered broker's epoch, as last seen
        self._epochs: dict[int, int] = {}
        #: broker -> the epoch whose process was found gone: out of every ISR and
        #: leadership until that registration goes or is replaced
        self._fenced: dict[int, int] = {}
        #: topic -> brokers that came back under a new epoch: taken out of the topic's
        #: ISRs and leaderships once (their old incarnation's place), as if dead
        self._evict: dict[str, set[int]] = {}
        #: the controller watches every other broker's process; other brokers watch
        #: the controller's
        self._brokers_watch = LivenessWatch(self._broker_gone, self._broker_back)
        self._controller_watch = LivenessWatch(self._controller_gone)
        self._topics: dict[str, TopicAssignment] = {}
        #: topics to reconcile, worked off by run() one at a time
        self._pending: set[str] = set()
        self._wake = anyio.Event()
        #: brokers in controlled shutdown: they get no new leaderships
        self._shutting_down: set[int] = set()
        #: what each broker published of its replicas on failed log dirs
        self._offline_reports: dict[int, OfflineReplicas] = {}
        #: partition -> brokers whose replica of it is on a failed log dir (reports of
        #: their current registration only): they may neither lead it nor be in its ISR
        self._offline: dict[Partition, set[int]] = {}
        #: elected, the first pass over the partitions not begun yet
        self._first_pass = False
        #: the partition states this broker's metadata listener holds, with their store
        #: versions (set by the broker): a controlled shutdown decides from them instead
        #: of reading every state again; each write is still conditional on the version
        #: decided from, so a state changed since fails alone and is read and decided
        #: again, as a state changed between a read and its write always was
        self.known_states: Callable[[], Mapping[Partition, VersionedState]] | None = None

    @property
    def is_active(self) -> bool:
        return self.lease is not None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Stand for election now and whenever the controller goes away; while
        elected, reconcile partition states as events arrive. Until cancelled.
        Started (task_status) once the first election was tried."""
        # the watch's first callback (the election, when there is no controller) has run
        # when it returns
        self._handles.append(await self.backend.watch_controller(self._controller_changed))
        task_status.started()
        self._handles.append(self.backend.on_session_lost(self._resign_locally))
        self._handles.append(self.backend.on_session_reestablished(self._try_elect))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._rebalance_loop)
                tg.start_soon(self._brokers_watch.run)
                tg.start_soon(self._controller_watch.run)
                while True:
                    await self._wake.wait()
                    self._wake = anyio.Event()
                    if self._first_pass and self.lease is not None:
                        # a broker that died with the last controller (its session
                        # lives on) is found gone within milliseconds: wait for that
                        # look, bounded, so the first pass elects for it at once
                        # rather than reading every state twice (issue 25)
                        self._first_pass = False
                        with anyio.move_on_after(FIRST_LOOK_WAIT_S):
                            await self._brokers_watch.first_looks()
                    while self._pending and self.lease is not None:
                        # every topic due, at once: their states are read together and
                        # written in batches (one multi per batch, not per partition)
                        names = sorted(self._pending)
                        self._pending.clear()
                        await self._reconcile(names)
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
        self._controller_watch.clear()
        if controller is None:
            await self._try_elect()
            return
        if controller == self.broker_id:
            return
        if self.lease is not None:
            log.warning("broker %d is controller now; this broker stops acting as one",
                        controller)
            self._resign_locally()
        # watch the controller's process: gone, it is replaced without waiting for
        # its session to expire
        registrations = await self.backend.live_brokers()
        epoch = (await self.backend.broker_epochs()).get(controller)
        endpoint = self._endpoint(controller, registrations.get(controller))
        if epoch is not None and endpoint is not None:
            self._controller_watch.watch({(controller, epoch): endpoint})

    async def _controller_gone(self, controller: int, epoch: int) -> None:
        try:
            if await self.backend.remove_dead_controller(controller):
                log.warning("controller %d (epoch %d) is gone: removed /controller so that "
                            "another broker is elected", controller, epoch)
        except (KafkaError, CoordinationError) as exc:
            log.info("removing /controller of the gone controller %d: %s", controller, exc)

    def _endpoint(self, broker_id: int, registration: BrokerRegistration | None
                  ) -> Endpoint | None:
        """Where broker_id's inter-broker listener is (as its fetchers reach it)."""
        if registration is None:
            return None
        try:
            parsed = registration.parsed_endpoints()
        except ValueError:
            return None
        chosen = next((e for e in parsed if e.listener_name == self.listener_name),
                      parsed[0] if parsed else None)
        return None if chosen is None else (chosen.host, chosen.port)

    async def _try_elect(self) -> None:
        if self.lease is not None:
            return
        lease = await self.backend.try_elect_controller(self.broker_id)
        if lease is None:
            return
        log.info("broker %d is the controller (epoch %d)", self.broker_id, lease.epoch)
        self.lease = lease
        self._controller_watch.clear()
        self._live = set()
        self._epochs = {}
        self._fenced = {}
        self._evict = {}
        self._topics = {}
        self._offline_reports = {}
        self._offline = {}
        self._first_pass = True
        self._duties = [
            await self.backend.watch_broker_epochs(self._brokers_changed),
            await self.backend.watch_topics(self._topics_changed),
            await self.backend.watch_topic_deletions(self._deletions_changed),
            await self.backend.watch_isr_changes(self._isr_changed),
            await self.backend.watch_reassignment_requests(self._reassignment_requested),
            await self.backend.watch_offline_replicas(self._offline_replicas_changed),
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
        self._brokers_watch.clear()

    # --- events (run by the store's watch dispatcher, one at a time) ------------------
    def _brokers_changed(self, brokers: dict[int, tuple[BrokerRegistration, int]]) -> None:
        registered = {b: epoch for b, (_, epoch) in brokers.items()}
        # a new epoch under a known id: the broker restarted (or re-registered after
        # losing its session) between two looks. Its old incarnation's place in the
        # ISRs is not its new one's: it leaves them and its leaderships, and catches
        # up before it is taken back (Kafka's bounced brokers)
        bounced = {b for b, e in registered.items()
                   if b in self._epochs and self._epochs[b] != e}
        self._fenced = {b: e for b, e in self._fenced.items() if registered.get(b) == e}
        self._epochs = registered
        self._refresh_offline()
        live = set(registered) - set(self._fenced)
        gone, back = self._live - live, live - self._live
        self._live = live
        self._shutting_down -= gone | back | bounced
        if bounced:
            for name in self._topics:
                self._evict.setdefault(name, set()).update(bounced)
        if gone or back or bounced:
            log.info("controller: live brokers %s (gone %s, new %s, restarted %s)",
                     sorted(live), sorted(gone), sorted(back), sorted(bounced))
            self._enqueue(list(self._topics))
        self._brokers_watch.watch({
            (b, e): endpoint for b, e in registered.items()
            if b != self.broker_id
            and (endpoint := self._endpoint(b, brokers[b][0])) is not None})

    def _broker_gone(self, broker_id: int, epoch: int) -> None:
        """The broker's process is gone (its listener refuses connections) while its
        session lives on: fence that incarnation now, as its session's expiry would."""
        if (self.lease is None or self._epochs.get(broker_id) != epoch
                or broker_id in self._fenced):
            return
        self._fenced[broker_id] = epoch
        self._live.discard(broker_id)
        self._shutting_down.discard(broker_id)
        log.warning("controller: broker %d (epoch %d) is gone; fenced until it registers "
                    "again: its partitions get new leaders and it leaves every ISR",
                    broker_id, epoch)
        self._enqueue(list(self._topics))

    def _broker_back(self, broker_id: int, epoch: int) -> None:
        """The fenced broker's listener answers again under the same registration: it
        was not gone after all (or a new process of it is starting, which registers
        anew in a moment): it may lead and join ISRs again."""
        if self.lease is None or self._fenced.get(broker_id) != epoch:
            return
        del self._fenced[broker_id]
        self._live.add(broker_id)
        log.warning("controller: broker %d (epoch %d) answers again; no longer fenced",
                    broker_id, epoch)
        self._enqueue(list(self._topics))

    def _offline_replicas_changed(self, reports: dict[int, OfflineReplicas]) -> None:
        self._offline_reports = reports
        self._refresh_offline()

    def _refresh_offline(self) -> None:
        """Recompute which replicas are offline from the brokers' reports, counting a
        report only under the registration it was made for (a restarted broker opened
        its dirs anew), and reconcile the topics whose offline replicas changed: their
        partitions get a new leader and lose those replicas from the ISR, as after a
        death (Kafka's onReplicasBecomeOffline)."""
        offline: dict[Partition, set[int]] = {}
        for broker, report in self._offline_reports.items():
            if self._epochs.get(broker) != report.broker_epoch:
                continue
            for ref in report.partitions:
                offline.setdefault((ref.topic, ref.partition), set()).add(broker)
        changed = {key for key in offline.keys() | self._offline.keys()
                   if offline.get(key) != self._offline.get(key)}
        self._offline = offline
        if changed and self.lease is not None:
            if offline:
                log.warning("controller: replicas on failed log dirs: %s; their partitions "
                            "get other leaders and they leave the ISRs until their broker "
                            "restarts", ", ".join(f"{t}-{p} on {sorted(b)}"
                                                  for (t, p), b in sorted(offline.items())))
            else:
                log.info("controller: no replica is on a failed log dir any more (their "
                         "brokers restarted or left); they may lead and join ISRs again")
            self._enqueue(sorted({topic for topic, _ in changed} & self._topics.keys()))

    def _live_for(self, live: set[int], key: Partition) -> set[int]:
        """`live` without the brokers whose replica of the partition is offline."""
        offline = self._offline.get(key)
        return live - offline if offline else live

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
        changed = await self.backend.consume_isr_changes()
        # a reassignment completes when its new replicas have joined the ISR
        self._enqueue(sorted({topic for topic, index in changed
                              if (a := self._topics.get(topic)) is not None
                              and index in a.partitions
                              and reassignment.is_reassigning(a, index)}))

    async def _reassignment_requested(self, moves: dict[Partition, list[int]]) -> None:
        """Moves written to /admin/reassign_partitions (the ZooKeeper way): start them as
        AlterPartitionReassignments would, then remove the request."""
        lease = self.lease
        if lease is None:
            return
        requests: dict[str, dict[int, list[int] | None]] = {}
        for (topic, index), replicas in moves.items():
            requests.setdefault(topic, {})[index] = replicas
        try:
            results = await self.alter_reassignments(requests)
            await self.backend.clear_reassignment_requests(lease)
        except ControllerMoved:
            self._resign_locally()
            return
        except KafkaError as exc:
            log.info("controller: /admin/reassign_partitions: %s", exc)
            return
        for (topic, index), error in sorted(results.items()):
            if error is not None:
                log.warning("controller: /admin/reassign_partitions %s-%d: %s; that "
                            "partition's move is dropped (correct the plan and run "
                            "reassign-partitions --execute again)", topic, index, error)

    # --- requests only the controller serves --------------------------------------------
    def _require_lease(self) -> ControllerLease:
        if self.lease is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller "
                             "for this cluster.")
        return self.lease

    async def alter_reassignments(self, requests: dict[str, dict[int, list[int] | None]]
                                  ) -> dict[Partition, KafkaError | None]:
        """Start (target replicas) or cancel (None) partition moves; the outcome per
        partition (None: accepted). Kafka's KafkaController.onPartitionReassignment
        entry: the assignment is written, the rest follows from the watches."""
        lease = self._require_lease()
        results: dict[Partition, KafkaError | None] = {}
        current = await self.backend.topic_assignments()
        for name, partitions in requests.items():
            assignment = current.get(name)
            updated = assignment
            for index, target in partitions.items():
                key = (name, index)
                if assignment is None or updated is None or index not in assignment.partitions:
                    results[key] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                              f"Unable to find partition {name}-{index}")
                    continue
                try:
                    updated = (reassignment.cancel(updated, index) if target is None
                               else reassignment.start(updated, index, target, self._live))
                    results[key] = None
                except KafkaError as exc:
                    results[key] = exc
            if updated is not None and updated != assignment:
                try:
                    await self.backend.set_partition_assignment(updated, lease)
                except ControllerMoved:
                    self._resign_locally()
                    raise KafkaError(ErrorCode.NOT_CONTROLLER) from None
                log.info("controller: reassigning %s: %s (adding %s, removing %s)", name,
                         updated.partitions, updated.adding_replicas, updated.removing_replicas)
                self._enqueue([name])
        return results

    def list_reassignments(self, partitions: list[Partition] | None
                           ) -> dict[Partition, tuple[list[int], list[int], list[int]]]:
        """The moves in progress: partition -> (replicas, adding, removing)."""
        self._require_lease()
        out = {}
        for name, assignment in sorted(self._topics.items()):
            for index in sorted(assignment.partitions):
                if partitions is not None and (name, index) not in partitions:
                    continue
                if reassignment.is_reassigning(assignment, index):
                    out[(name, index)] = (list(assignment.partitions[index]),
                                          list(assignment.adding_replicas.get(index, [])),
                                          list(assignment.removing_replicas.get(index, [])))
        return out

    async def elect_leaders(self, election_type: int, partitions: list[Partition] | None
                            ) -> dict[Partition, KafkaError | None]:
        """ElectLeaders: preferred (0) or unclean (1) election per partition; every
        partition when `partitions` is None. Outcome per partition (None: elected)."""
        self._require_lease()
        if partitions is None:
            partitions = [(n, i) for n, a in sorted(self._topics.items())
                          for i in sorted(a.partitions)]
        results: dict[Partition, KafkaError | None] = {}
        # in batches, as the other state changes: every state read in one go, the
        # elections written one multi per batch, each conditional on the version it was
        # decided from; a state that changed meanwhile is read and decided again
        todo = list(dict.fromkeys(partitions))
        for _ in range(WRITE_RETRIES):
            if not todo:
                break
            lease = self._require_lease()
            states = await self.backend.partition_states_of(
                k for k in todo if k[0] in self._topics)
            updates: list[StateUpdate] = []
            for key in todo:
                decided = self._elect_one(election_type, key, states.get(key), lease)
                if isinstance(decided, KafkaError):
                    results[key] = decided
                else:
                    updates.append(StateUpdate(key[0], key[1], decided, states[key].version))
            todo = []
            if not updates:
                break
            try:
                outcomes = await self.backend.update_partition_states(updates, lease)
            except ControllerMoved:
                self._resign_locally()
                raise KafkaError(ErrorCode.NOT_CONTROLLER) from None
            for update in updates:
                key = (update.topic, update.partition)
                outcome = outcomes.get(key)
                if isinstance(outcome, StaleVersion):
                    todo.append(key)
                elif isinstance(outcome, int):
                    results[key] = None
                    log.info("controller: %s election of %s-%d: leader %d epoch %d",
                             "unclean" if election_type == UNCLEAN else "preferred",
                             update.topic, update.partition, update.state.leader,
                             update.state.leader_epoch)
                else:
                    results[key] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                              f"The partition {key[0]}-{key[1]} does not "
                                              "exist.")
        for name, index in todo:
            results[(name, index)] = KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                                f"{name}-{index} kept changing")
        return {key: results[key] for key in dict.fromkeys(partitions)}

    def _elect_one(self, election_type: int, key: Partition, current: VersionedState | None,
                   lease: ControllerLease) -> LeaderAndIsr | KafkaError:
        """The state a preferred or unclean election gives the partition, or why none."""
        name, index = key
        assignment = self._topics.get(name)
        if assignment is None or index not in assignment.partitions or current is None:
            return KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              f"The partition {name}-{index} does not exist.")
        replicas = assignment.partitions[index]
        live = self._live_for(self._live - self._shutting_down, key)
        state = current.state
        chosen: LeaderAndIsr | None
        if election_type == UNCLEAN:
            if state.leader != election.NO_LEADER:
                return KafkaError(ErrorCode.ELECTION_NOT_NEEDED,
                                  "Leader election not needed for topic partition.")
            chosen = election.unclean(replicas, state, live, lease.epoch)
            if chosen is None:
                return KafkaError(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                  f"Failed to elect leader for partition {name}-{index} "
                                  "under strategy UncleanLeaderElectionStrategy")
            return chosen
        if replicas and state.leader == replicas[0]:
            return KafkaError(ErrorCode.ELECTION_NOT_NEEDED,
                              "Leader election not needed for topic partition.")
        chosen = election.preferred(replicas, state, live, lease.epoch)
        if chosen is None:
            return KafkaError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                              f"Failed to elect leader for partition {name}-{index} "
                              "under strategy PreferredReplicaPartitionLeaderElection"
                              "Strategy")
        return chosen

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[Partition]:
        """Move `broker_id`'s leaderships to other ISR members and take it out of the
        ISRs (Kafka's KafkaController.doControlledShutdown). Returns the partitions
        it still leads (no other replica could take over): the broker retries.

        Only the live broker itself may ask: `broker_epoch` must be its registration's
        epoch. Kafka fences only older epochs and lets pre-2.2 brokers send none (-1);
        pybroker has no such brokers, so anything but the current epoch is
        STALE_BROKER_EPOCH: a stray or forged request cannot take a broker's
        leaderships away."""
        self._require_lease()
        # the asking broker's registration alone, read now (one read: not every
        # broker's); the watched view may not show a re-registration yet
        registered = await self.backend.broker_epoch(broker_id)
        if broker_id not in self._live or registered is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE,
                             f"Broker {broker_id} is not registered.")
        if broker_epoch != registered:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"Broker epoch {broker_epoch} of broker {broker_id} is not its "
                             f"current epoch {registered}.")
        self._require_lease()  # still the controller after the read
        self._shutting_down.add(broker_id)
        held = [(name, index) for name, assignment in sorted(self._topics.items())
                for index, replicas in sorted(assignment.partitions.items())
                if broker_id in replicas and len(replicas) > 1]
        started = time.monotonic()
        remaining, work = await self._without_broker(held, broker_id)
        log.info("controller: controlled shutdown of broker %d, %d partition(s) remaining "
                 "(%d partition(s) in %.3f s: %s)", broker_id, len(remaining), len(held),
                 time.monotonic() - started, work)
        return remaining

    async def _without_broker(self, partitions: list[Partition], broker_id: int
                              ) -> tuple[list[Partition], str]:
        """Move `broker_id`'s leaderships of these partitions to other ISR members and
        take it out of their ISRs, in batches: every state read in one go, the changes
        written one multi per batch, each conditional on the version it was decided
        from. A partition whose state changed meanwhile (a leader's ISR change) is read
        and decided again, up to WRITE_RETRIES times. Returns the partitions it still
        leads (nobody else could take over, or they kept changing), and what was done
        (for the log)."""
        todo = partitions
        remaining: list[Partition] = []
        moved = shrunk = rounds = 0
        reading = writing = 0.0
        for _ in range(WRITE_RETRIES):
            if not todo:
                break
            lease = self._require_lease()
            rounds += 1
            started = time.monotonic()
            states = await self._states_for_shutdown(todo, rounds == 1)
            reading += time.monotonic() - started
            # the leaderships first, then the ISRs it only follows in (Kafka's
            # doControlledShutdown: the leader elections, then the replicas offline):
            # every leadership has moved, and the brokers taking over are told, after a
            # third of the writes at RF 3 rather than with the last. The ISR changes are
            # sent once the moves are answered: a standalone ZooKeeper serves a read
            # after the writes queued before it, so a broker taking over re-read its new
            # leaderships only after every ISR change had been written too
            moves: list[StateUpdate] = []
            shrinks: list[StateUpdate] = []
            pace = LoopSlice()  # 30,000 states at 10,000 leaderships a broker
            for key in todo:
                await pace.pause_if_due()
                current = states.get(key)
                assignment = self._topics.get(key[0])
                if current is None or assignment is None or key[1] not in assignment.partitions:
                    continue  # deleted meanwhile
                changed = election.without_broker(assignment.partitions[key[1]], current.state,
                                                  broker_id, self._live_for(self._live, key),
                                                  self._shutting_down,
                                                  lease.epoch)
                if changed is not None:
                    (moves if current.state.leader == broker_id else shrinks).append(
                        StateUpdate(key[0], key[1], changed, current.version))
                elif current.state.leader == broker_id:
                    remaining.append(key)
            led = {(u.topic, u.partition) for u in moves}
            updates = moves + shrinks
            if not updates:
                todo = []
                break
            started = time.monotonic()
            outcomes: dict[Partition, StateOutcome] = {}
            try:
                for part in (moves, shrinks):
                    if part:
                        outcomes.update(await self.backend.update_partition_states(part,
                                                                                   lease))
            except ControllerMoved:
                self._resign_locally()
                raise KafkaError(ErrorCode.NOT_CONTROLLER) from None
            writing += time.monotonic() - started
            todo = []
            # one line a partition only at DEBUG: 10,000 log records written from the
            # loop in one go held it for a second on a loaded machine (issue 25)
            detailed = log.isEnabledFor(logging.DEBUG)
            for update in updates:
                key = (update.topic, update.partition)
                outcome = outcomes.get(key)
                if isinstance(outcome, StaleVersion):
                    todo.append(key)
                elif isinstance(outcome, int) and key in led:
                    moved += 1
                    if detailed:
                        log.debug("controller: %s-%d leader %d epoch %d isr %s (controlled "
                                  "shutdown of broker %d)", update.topic, update.partition,
                                  update.state.leader, update.state.leader_epoch,
                                  update.state.isr, broker_id)
                elif isinstance(outcome, int):
                    shrunk += 1
                    if detailed:
                        log.debug("controller: %s-%d isr %s (controlled shutdown of broker "
                                  "%d)", update.topic, update.partition, update.state.isr,
                                  broker_id)
        # kept changing under the controller: reported, the broker asks again
        remaining.extend(key for key in todo if key[0] in self._topics)
        return remaining, (f"{moved} leadership(s) moved, {shrunk} ISR(s) without it, "
                           f"{rounds} round(s), reading states {reading:.3f} s, writing "
                           f"them {writing:.3f} s")

    async def _states_for_shutdown(self, keys: list[Partition], first: bool
                                   ) -> Mapping[Partition, VersionedState]:
        """The states a controlled shutdown decides from: in its first round those this
        broker's listener holds (reading 30,000 states back from ZooKeeper was a large
        part of the controller's time, issue 25), the others read; in a later round,
        every one read (they lost a version race: what is stored has moved on)."""
        known = self.known_states() if first and self.known_states is not None else {}
        states = {key: found for key in keys if (found := known.get(key)) is not None}
        missing = [key for key in keys if key not in states]
        if missing:
            states.update(await self.backend.partition_states_of(missing))
        return states

    async def _rebalance_loop(self) -> None:
        """Kafka's auto leader rebalance: every leader.imbalance.check.interval.seconds,
        a broker leading too few of the partitions it is the preferred leader of
        (more than leader.imbalance.per.broker.percentage % led elsewhere) gets them
        back by preferred-replica election."""
        while True:
            await anyio.sleep(self.config["leader.imbalance.check.interval.seconds"])
            if self.lease is None or not self.config["auto.leader.rebalance.enable"]:
                continue
            try:
                await self.rebalance_leaders()
            except KafkaError as exc:
                log.info("controller: leader rebalance: %s", exc)

    async def rebalance_leaders(self) -> list[Partition]:
        """One imbalance check; the partitions whose preferred leader was elected."""
        percentage = self.config["leader.imbalance.per.broker.percentage"]
        preferred: dict[int, list[Partition]] = {}
        misled: dict[int, list[Partition]] = {}
        # Kafka skips topics being reassigned
        topics = [a for _, a in sorted(self._topics.items())
                  if not any(reassignment.is_reassigning(a, i) for i in a.partitions)]
        states = await self.backend.partition_states_of(
            (a.name, i) for a in topics for i in sorted(a.partitions))
        for assignment in topics:
            name = assignment.name
            for index, replicas in sorted(assignment.partitions.items()):
                if not replicas or (name, index) not in states:
                    continue
                first = replicas[0]
                preferred.setdefault(first, []).append((name, index))
                if states[(name, index)].state.leader != first:
                    misled.setdefault(first, []).append((name, index))
        elected: list[Partition] = []
        for broker, partitions in sorted(misled.items()):
            ratio = len(partitions) / len(preferred[broker])
            if ratio * 100 <= percentage or broker not in self._live:
                continue
            log.info("controller: broker %d leads %d of its %d preferred partitions; "
                     "rebalancing", broker, len(preferred[broker]) - len(partitions),
                     len(preferred[broker]))
            results = await self.elect_leaders(PREFERRED, partitions)
            elected.extend(k for k, error in results.items() if error is None)
        return elected

    # --- the partition state machine --------------------------------------------------
    async def _reconcile(self, names: list[str]) -> None:
        """Bring these topics' partition states in line with the live brokers."""
        lease = self.lease
        assignments = [a for n in names if (a := self._topics.get(n)) is not None]
        if lease is None or not assignments:
            return
        evicted = {a.name: set(self._evict.get(a.name, ())) for a in assignments}
        started = time.monotonic()
        try:
            stale = await self._reconcile_topics(assignments, lease, evicted)
            log.info("controller: reconciled %d topic(s), %d partition(s) in %.3f s",
                     len(assignments), sum(len(a.partitions) for a in assignments),
                     time.monotonic() - started)
        except ControllerMoved:
            log.warning("controller epoch moved on; broker %d stops acting as controller",
                        self.broker_id)
            self._resign_locally()
            return
        for assignment in assignments:
            name = assignment.name
            if name in stale or not evicted[name] or name not in self._evict:
                continue
            self._evict[name] -= evicted[name]
            if not self._evict[name]:
                del self._evict[name]
            # once more with them live: an offline partition they alone can lead
            # (their ISR) gets them back as leader
            self._enqueue([name])
        if stale:
            # a leader changed an ISR meanwhile: read those topics' states again
            await anyio.sleep(RETRY_DELAY_S)
            self._enqueue(sorted(stale))

    async def _reconcile_topics(self, assignments: list[TopicAssignment],
                                lease: ControllerLease, evicted: dict[str, set[int]]
                                ) -> set[str]:
        """Write the states the topics' partitions should have, each topic with the live
        brokers minus its evicted ones; the topics where a state had changed under the
        controller (reconcile them again). Every state is read in one go (multiReads sent
        together) and the changed ones written in batches (Kafka 1.1's batched, pipelined
        state changes), a chunk's as soon as its states are decided; each
        write stays conditional on the version it was decided from, so a state a leader
        changed meanwhile is not overwritten but decided again."""
        for assignment in assignments:
            if assignment.topic_id == uuid.UUID(int=0):
                # a topic znode written before topic ids (Kafka < 2.8): the controller gives
                # it one, once (Kafka's KafkaController.setTopicIds); the write is versioned
                # and fenced, so one id wins, and the topics watch brings it to every broker
                try:
                    await self.backend.set_partition_assignment(
                        msgspec.structs.replace(assignment, topic_id=uuid.uuid4()), lease)
                except ControllerMoved:
                    raise
                except KafkaError as exc:  # deleted under us
                    log.info("controller: topic %s: %s", assignment.name, exc)
                    continue
                log.info("controller: topic %s had no topic id; assigned one", assignment.name)
        new: dict[str, dict[int, LeaderAndIsr]] = {}
        completed: dict[str, dict[int, list[int]]] = {}
        stale: set[str] = set()
        failed: list[Exception] = []

        async def chunk_pass(chunk: list[TopicAssignment]) -> None:
            try:
                states = await self.backend.partition_states_of(
                    (a.name, i) for a in chunk for i in sorted(a.partitions))
                updates = await self._decide(chunk, states, lease, evicted, new, completed)
                stale.update(await self._write_states(updates, lease))
            except Exception as exc:  # ControllerMoved, the store unreachable: raised below
                failed.append(exc)

        # in chunks of topics, every chunk's read sent at once: each chunk is decided and
        # its writes sent as soon as its states arrive, so ZooKeeper writes the first
        # chunks while the rest are still decoded and decided (a new controller's first
        # pass over 30,000 partitions, issue 25)
        async with anyio.create_task_group() as tg:
            for chunk in _chunks(assignments, RECONCILE_CHUNK_PARTITIONS):
                tg.start_soon(chunk_pass, chunk)
        if failed:
            raise next((e for e in failed if isinstance(e, ControllerMoved)), failed[0])
        for name, created in new.items():
            try:
                await self.backend.create_partition_states(name, created, lease)
            except StaleVersion:
                stale.add(name)
            except ControllerMoved:
                raise
            except KafkaError as exc:  # deleted under us
                log.info("controller: topic %s: %s", name, exc)
        by_name = {a.name: a for a in assignments}
        for name, moves in completed.items():
            if name in stale:
                continue
            try:
                if await self._complete(by_name[name], moves, lease):
                    stale.add(name)
            except ControllerMoved:
                raise
            except KafkaError as exc:  # deleted under us
                log.info("controller: topic %s: %s", name, exc)
        return stale

    async def _decide(self, assignments: list[TopicAssignment],
                      states: dict[Partition, VersionedState], lease: ControllerLease,
                      evicted: dict[str, set[int]], new: dict[str, dict[int, LeaderAndIsr]],
                      completed: dict[str, dict[int, list[int]]]) -> list[StateUpdate]:
        """The changed states of these topics' partitions, each conditional on the
        version read; partitions without a state go to `new`, moves found complete to
        `completed`."""
        updates: list[StateUpdate] = []
        # a chunk is RECONCILE_CHUNK_PARTITIONS states: deciding them in one go held the
        # loop for 100s of ms on a loaded machine (issue 25); what the loop does
        # meanwhile cannot change what was read, and the writes stay conditional on it
        pace = LoopSlice()
        for assignment in assignments:
            name = assignment.name
            topic_live = self._live - evicted[name]
            unclean: bool | None = None
            for index, replicas in sorted(assignment.partitions.items()):
                await pace.pause_if_due()
                live = self._live_for(topic_live, (name, index))
                current = states.get((name, index))
                if current is None:
                    state = election.initial_state(replicas, live, lease.epoch)
                    if state is not None:
                        new.setdefault(name, {})[index] = state
                    continue
                changed = election.after_broker_change(replicas, current.state, live,
                                                       lease.epoch, False)
                # unclean.leader.election.enable matters only to a partition no live ISR
                # member can lead: the topic's setting is read for those alone
                if (changed or current.state).leader == election.NO_LEADER:
                    if unclean is None:
                        unclean = await self._unclean(name)
                    if unclean:
                        changed = election.after_broker_change(replicas, current.state, live,
                                                               lease.epoch, True)
                if reassignment.is_reassigning(assignment, index):
                    done = reassignment.completion(assignment, index,
                                                   changed or current.state, live,
                                                   self._shutting_down, lease.epoch)
                    if done is not None:
                        completed.setdefault(name, {})[index] = \
                            reassignment.target_replicas(assignment, index)
                        if done != current.state:
                            changed = done
                elif changed is None:
                    changed = election.conform(replicas, current.state, live, lease.epoch)
                if changed is not None:
                    updates.append(StateUpdate(name, index, changed, current.version))
        return updates

    async def _write_states(self, updates: list[StateUpdate], lease: ControllerLease
                            ) -> set[str]:
        """Write the changed states in batches; the topics where one had changed under
        the controller (StaleVersion). A state whose topic is gone is skipped."""
        if not updates:
            return set()
        outcomes = await self.backend.update_partition_states(updates, lease)
        stale: set[str] = set()
        # a line per state (Kafka's state-change log): thousands in a controlled shutdown
        # or a failover, formatted and written on the loop, were one of its longest
        # stalls at 10,000 partitions (issue 25), so a pass over them gives the loop
        # turns, and a batch of more than LOGGED_STATES logs each at DEBUG and a summary
        # line at INFO (as the leaders' ISR rounds do)
        each = logging.INFO if len(updates) <= LOGGED_STATES else logging.DEBUG
        logs_each = log.isEnabledFor(each)
        pace = LoopSlice()
        for update in updates:
            await pace.pause_if_due()
            outcome = outcomes.get((update.topic, update.partition))
            if isinstance(outcome, StaleVersion):
                stale.add(update.topic)
            elif isinstance(outcome, Exception):
                log.info("controller: %s-%d: %s", update.topic, update.partition, outcome)
            elif logs_each:
                log.log(each, "controller: %s-%d leader %d epoch %d isr %s", update.topic,
                        update.partition, update.state.leader, update.state.leader_epoch,
                        update.state.isr)
        if len(updates) > 1:
            log.info("controller: %d partition state(s) written, %d stale%s", len(updates),
                     sum(isinstance(o, StaleVersion) for o in outcomes.values()),
                     "" if each == logging.INFO else " (each state's line at DEBUG)")
        return stale

    async def _complete(self, seen: TopicAssignment, completed: dict[int, list[int]],
                        lease: ControllerLease) -> bool:
        """The moves whose states are written: their partitions' assignment becomes the
        target. Written over the store's current assignment, and only for partitions
        whose move is still the one judged complete (an operator may have changed it
        meanwhile); True when one was not (reconcile again)."""
        fresh = (await self.backend.topic_assignments()).get(seen.name)
        if fresh is None or fresh.topic_id != seen.topic_id:
            return False
        done, changed = fresh, False
        for index, target in completed.items():
            if (fresh.partitions.get(index) != seen.partitions.get(index)
                    or fresh.adding_replicas.get(index) != seen.adding_replicas.get(index)
                    or fresh.removing_replicas.get(index) != seen.removing_replicas.get(index)):
                changed = True
                continue
            done = reassignment.with_partition(done, index, target, [], [])
        if done != fresh:
            await self.backend.set_partition_assignment(done, lease)
            for index, target in completed.items():
                if done.partitions[index] == target:
                    log.info("controller: reassignment of %s-%d to %s completed", seen.name,
                             index, target)
        return changed

    async def _unclean(self, topic: str) -> bool:
        value = (await self.backend.topic_configs(topic)).get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config["unclean.leader.election.enable"])
        return value.strip().lower() == "true"
