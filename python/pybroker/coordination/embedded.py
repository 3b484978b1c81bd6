"""Single-node metadata kept in one JSON file in the first log dir.

`EmbeddedBackend` implements CoordinationBackend for a cluster of one: the election
always succeeds while nobody holds the controller, "ephemeral" state (broker
registrations, the controller, ISR change notifications) lives as long as the
object, and znode versions are kept in memory, so conditional and fenced writes
fail exactly where ZooKeeper would fail them. Watches fire on the event loop after
each change, through the same dispatcher as the ZooKeeper backend.

`EmbeddedStore` is the broker's old synchronous view of the same state (topics(),
create_topic(), ...), kept until its callers move to the backend (`store.backend`).

File format (`pybroker-metadata.json`), version 2, msgspec JSON:

  {"version": 2, "cluster_id": "<base64 uuid>", "producer_id_next": 2000,
   "controller_epoch": 3, "pending_deletion": ["t"],
   "topics": [{"name": "t", "topic_id": "<uuid, canonical form>", "configs": {...},
               "partitions": [{"replicas": [0], "adding_replicas": [],
                               "removing_replicas": [],
                               "state": <LeaderAndIsr as in ZooKeeper> | null}]}]}

Partition i of a topic is the i-th entry. Version 1 (before cluster mode) is read too:
partitions were {"leader", "leader_epoch", "replicas", "isr"} and there was no
controller epoch or deletion mark; it is rewritten as version 2 when it is loaded.

Writes (issue 25): that file is a snapshot; each change after it is one frame appended
to `pybroker-metadata.journal` (journal.py: checksummed lines, fsynced), so a write
costs what it changes, not the whole store. A frame is `{"seq": n, "changes": [...]}`
(the `_Change` structs below); the snapshot's `journal_seq` is the last frame it holds.
Loading reads the snapshot and replays the frames after it (a torn last frame, from a
crash mid-write, is dropped: it was never acknowledged). Once the journal has grown
past the snapshot's size (and at least COMPACT_MIN_BYTES), the state is written as a
new snapshot (a temporary file, fsynced, renamed over the old one, the directory
fsynced) and the journal emptied; a crash in between replays nothing twice, as frames
at or below `journal_seq` are skipped. A clean close compacts too, so the snapshot
alone is the whole state after a clean shutdown.

Async writes run one at a time under a lock: checked against the state in memory,
written and fsynced on a worker thread (the event loop keeps serving meanwhile), only
then applied in memory and reported to watches, so nothing reads or acts on a change
before it is durable, as before. The `*_now` methods (EmbeddedStore's synchronous
callers) write on the calling thread."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import msgspec

from pybroker.coordination.base import (
    ENTITY_TYPES,
    PRODUCER_ID_BLOCK_SIZE,
    ControllerLease,
    PartitionState,
    StateOutcome,
    StateUpdate,
    TopicAssignment,
    TopicRecord,
    VersionedState,
    check_entity_type,
    validate_assignment,
    validate_topic_name,
)
from pybroker.coordination.errors import (
    BrokerIdInUse,
    ControllerMoved,
    CoordinationUnavailable,
    MalformedZNode,
    StaleVersion,
)
from pybroker.coordination.journal import Journal, frame
from pybroker.coordination.watches import (
    Callback,
    Dispatcher,
    StateBatches,
    WatchHandle,
    invoke,
)
from pybroker.coordination.znodes import (
    BrokerRegistration,
    LeaderAndIsr,
    new_cluster_id,
    partition_state_path,
)
from pybroker.errors import ErrorCode, KafkaError

METADATA_FILE = "pybroker-metadata.json"
JOURNAL_FILE = "pybroker-metadata.journal"
FILE_VERSION = 2
#: the journal is folded into a new snapshot once it is larger than the snapshot and
#: than this (so a write costs O(change), compaction O(store) once per O(store) written)
COMPACT_MIN_BYTES = 1 << 20

__all__ = ["EmbeddedBackend", "EmbeddedStore", "JOURNAL_FILE", "METADATA_FILE",
           "new_cluster_id"]


# --- file format -------------------------------------------------------------------------

class _FileVersion(msgspec.Struct):
    version: int


class _PartitionV1(msgspec.Struct):
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


class _TopicV1(msgspec.Struct):
    name: str
    topic_id: uuid.UUID
    partitions: list[_PartitionV1]
    configs: dict[str, str]


class _FileV1(msgspec.Struct):
    version: int
    cluster_id: str
    topics: list[_TopicV1]
    producer_id_next: int = 0


class _PartitionV2(msgspec.Struct):
    replicas: list[int]
    adding_replicas: list[int] = []
    removing_replicas: list[int] = []
    state: LeaderAndIsr | None = None


class _TopicV2(msgspec.Struct):
    name: str
    topic_id: uuid.UUID
    partitions: list[_PartitionV2]
    configs: dict[str, str] = {}


class _FileV2(msgspec.Struct):
    version: int
    cluster_id: str
    topics: list[_TopicV2]
    producer_id_next: int = 0
    controller_epoch: int = 0
    pending_deletion: list[str] = []
    #: configs of entities other than topics: type -> name -> configs (added later in
    #: version 2; absent in older files)
    entity_configs: dict[str, dict[str, dict[str, str]]] = {}
    #: the last journal frame this snapshot holds (absent before the journal: 0)
    journal_seq: int = 0


# --- journal frames: one per write, a list of changes applied in order ------------------

class _TopicPut(msgspec.Struct, tag="topic"):
    """A topic created, or its assignment changed (its states and configs are kept)."""

    name: str
    topic_id: uuid.UUID
    partitions: list[_PartitionV2]


class _ConfigsPut(msgspec.Struct, tag="configs"):
    name: str
    configs: dict[str, str]


class _StatesPut(msgspec.Struct, tag="states"):
    """Partition states written (a new partition's at version 0, else version + 1)."""

    name: str
    states: dict[int, LeaderAndIsr]


class _TopicDelete(msgspec.Struct, tag="delete"):
    name: str


class _DeletionMark(msgspec.Struct, tag="mark"):
    name: str


class _EntityConfigsPut(msgspec.Struct, tag="entity"):
    entity_type: str
    name: str
    configs: dict[str, str]


class _ProducerIds(msgspec.Struct, tag="pids"):
    next: int


class _ControllerEpoch(msgspec.Struct, tag="epoch"):
    epoch: int


_Change = (_TopicPut | _ConfigsPut | _StatesPut | _TopicDelete | _DeletionMark
           | _EntityConfigsPut | _ProducerIds | _ControllerEpoch)


class _Frame(msgspec.Struct):
    seq: int
    changes: list[_Change]


@dataclasses.dataclass
class _Topic:
    """One topic as the backend holds it; versions are in memory only."""

    topic_id: uuid.UUID
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]]
    removing: dict[int, list[int]]
    configs: dict[str, str]
    states: dict[int, LeaderAndIsr]
    state_versions: dict[int, int]

    def assignment(self, name: str) -> TopicAssignment:
        return TopicAssignment(
            name=name, topic_id=self.topic_id,
            partitions={p: list(r) for p, r in self.partitions.items()},
            adding_replicas={p: list(r) for p, r in self.adding.items()},
            removing_replicas={p: list(r) for p, r in self.removing.items()})


def _read_file(path: Path) -> tuple[_FileV2, int]:
    """The file's state (as version 2) and the version it was written in."""
    data = path.read_bytes()
    try:
        version = msgspec.json.decode(data, type=_FileVersion).version
        if version == 1:
            old = msgspec.json.decode(data, type=_FileV1)
            return _FileV2(version=FILE_VERSION, cluster_id=old.cluster_id,
                           producer_id_next=old.producer_id_next, topics=[
                               _TopicV2(name=t.name, topic_id=t.topic_id, configs=t.configs,
                                        partitions=[_PartitionV2(
                                            replicas=p.replicas,
                                            state=LeaderAndIsr(controller_epoch=0,
                                                               leader=p.leader,
                                                               leader_epoch=p.leader_epoch,
                                                               isr=p.isr))
                                            for p in t.partitions])
                               for t in old.topics]), version
        if version == FILE_VERSION:
            return msgspec.json.decode(data, type=_FileV2), version
    except msgspec.DecodeError as exc:
        raise MalformedZNode(str(path), data, str(exc)) from exc
    raise MalformedZNode(str(path), data, f"unknown metadata file version {version} "
                         f"(this pybroker reads 1 and {FILE_VERSION})")


# --- the backend -------------------------------------------------------------------------

class EmbeddedBackend:
    """CoordinationBackend for one node; see the module docstring."""

    def __init__(self, data_dir: str | Path, broker_id: int) -> None:
        self.path = Path(data_dir) / METADATA_FILE
        self.broker_id = broker_id
        #: bumped on every topic change; EmbeddedStore rebuilds its records from it
        self.generation = 0
        self._topics: dict[str, _Topic] = {}
        self._pending_deletion: set[str] = set()
        self._producer_id_next = 0
        self._controller_epoch = 0
        self._brokers: dict[int, BrokerRegistration] = {}
        #: broker epochs grow with each registration, as ZooKeeper's creation zxids do
        self._broker_epochs: dict[int, int] = {}
        # from the wall clock (µs): epochs grow across restarts too, and a client cannot
        # guess a broker's epoch to forge its ControlledShutdown (a count from 0 gave 1)
        self._broker_epoch_next = time.time_ns() // 1000
        self._controller: int | None = None
        self._entity_configs: dict[str, dict[str, dict[str, str]]] = {}
        self._isr_changes: list[set[tuple[str, int]]] = []
        self._dispatcher = Dispatcher()
        self._watchers: dict[str, dict[WatchHandle, Callback]] = {
            kind: {} for kind in ("brokers", "controller", "topics", "configs", "deletions",
                                  "states", "isr", *(f"entity:{t}" for t in ENTITY_TYPES))}
        self._journal = Journal(self.path.with_name(JOURNAL_FILE))
        #: the last journal frame written (and applied)
        self._seq = 0
        #: size of the last snapshot written or read (the compaction threshold)
        self._snapshot_bytes = 0
        #: one async write at a time (made on first use: it belongs to the event loop)
        self._lock: anyio.Lock | None = None
        #: why the journal cannot be written any more (a failed write): every later
        #: write fails too, rather than be acknowledged behind a hole
        self._broken: str | None = None
        if self.path.exists():
            self._open_existing()
        else:
            if self._journal.path.exists():
                raise MalformedZNode(str(self._journal.path), None,
                                     f"a metadata journal without its snapshot {self.path}")
            self._cluster_id = new_cluster_id()
            self._write_snapshot(self._snapshot())

    # --- lifecycle and session ---
    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    async def start(self) -> None:
        self._dispatcher.start()

    async def close(self) -> None:
        self._brokers.clear()
        self._broker_epochs.clear()
        self._controller = None
        await self._dispatcher.close()
        async with self._writing():
            if self._broken is None and self._journal.size:
                # the snapshot alone is the whole state after a clean shutdown
                snapshot = self._snapshot()
                await anyio.to_thread.run_sync(self._compact, snapshot)
        self._journal.close()

    def on_session_lost(self, callback: Callback) -> WatchHandle:
        return WatchHandle()  # there is no session to lose

    def on_session_reestablished(self, callback: Callback) -> WatchHandle:
        return WatchHandle()

    async def settle(self) -> None:
        """Wait until every callback due so far has run."""
        await self._dispatcher.wait_idle()

    # --- brokers ---
    async def register_broker(self, broker_id: int, registration: BrokerRegistration) -> int:
        if broker_id in self._brokers:
            raise BrokerIdInUse(broker_id, f"/brokers/ids/{broker_id}")
        self._brokers[broker_id] = registration
        self._broker_epoch_next += 1
        self._broker_epochs[broker_id] = self._broker_epoch_next
        self._fire("brokers")
        return self._broker_epoch_next

    async def unregister_broker(self, broker_id: int) -> None:
        self._broker_epochs.pop(broker_id, None)
        if self._brokers.pop(broker_id, None) is not None:
            self._fire("brokers")

    async def broker_epochs(self) -> dict[int, int]:
        return dict(self._broker_epochs)

    async def broker_epoch(self, broker_id: int) -> int | None:
        return self._broker_epochs.get(broker_id)

    async def live_brokers(self) -> dict[int, BrokerRegistration]:
        return dict(self._brokers)

    async def watch_brokers(self, callback: Callback) -> WatchHandle:
        return await self._watch("brokers", callback)

    async def watch_broker_epochs(self, callback: Callback) -> WatchHandle:
        async def with_epochs(brokers: dict[int, BrokerRegistration]) -> None:
            await invoke(callback, {b: (r, self._broker_epochs[b]) for b, r in brokers.items()
                                    if b in self._broker_epochs})
        return await self._watch("brokers", with_epochs)

    # --- controller ---
    async def try_elect_controller(self, broker_id: int) -> ControllerLease | None:
        async with self._writing():
            if self._controller == broker_id:  # already ours: this node is its only session
                return ControllerLease(broker_id=broker_id, epoch=self._controller_epoch,
                                       epoch_zk_version=self._controller_epoch)
            if self._controller is not None:
                return None
            await self._commit([_ControllerEpoch(self._controller_epoch + 1)])
            self._controller = broker_id
            self._fire("controller")
            return ControllerLease(broker_id=broker_id, epoch=self._controller_epoch,
                                   epoch_zk_version=self._controller_epoch)

    async def controller_id(self) -> int | None:
        return self._controller

    async def controller_epoch(self) -> tuple[int, int]:
        # the version of /controller_epoch tracks the epoch: each election writes it once
        epoch = self._controller_epoch
        return epoch, (epoch if epoch else -1)

    async def watch_controller(self, callback: Callback) -> WatchHandle:
        return await self._watch("controller", callback)

    @property
    def session_id(self) -> int | None:
        return None

    async def remove_stale_registration(self, broker_id: int, session: int) -> bool:
        return False  # no sessions: a single node's registration goes with its process

    async def remove_dead_controller(self, broker_id: int) -> bool:
        return False  # the single node is its own controller

    async def resign(self, lease: ControllerLease) -> None:
        if self._controller == lease.broker_id and self._controller_epoch == lease.epoch:
            self._controller = None
            self._fire("controller")

    def _fence(self, lease: ControllerLease | None) -> None:
        if lease is not None and lease.epoch_zk_version != self._controller_epoch:
            raise ControllerMoved(
                f"controller epoch is {self._controller_epoch}, this controller's lease is "
                f"for epoch {lease.epoch}")

    # --- topics ---
    async def topic_assignments(self) -> dict[str, TopicAssignment]:
        return {name: t.assignment(name) for name, t in self._topics.items()}

    async def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str],
                           lease: ControllerLease | None) -> None:
        async with self._writing():
            self._fence(lease)
            await self._commit(self._topic_creation(assignment, configs, {}))
            self._topic_created(assignment.name, {})

    def create_topic_now(self, assignment: TopicAssignment, configs: Mapping[str, str],
                         states: Mapping[int, LeaderAndIsr]) -> None:
        """create_topic on the calling thread (and optionally with partition states at
        once), for EmbeddedStore's synchronous callers."""
        self._commit_now(self._topic_creation(assignment, configs, states))
        self._topic_created(assignment.name, states)

    def _topic_creation(self, assignment: TopicAssignment, configs: Mapping[str, str],
                        states: Mapping[int, LeaderAndIsr]) -> list[_Change]:
        validate_topic_name(assignment.name)
        validate_assignment(assignment.partitions)
        if assignment.name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"Topic '{assignment.name}' already exists.")
        changes: list[_Change] = [_topic_put(assignment), _ConfigsPut(assignment.name,
                                                                      dict(configs))]
        if states:
            changes.append(_StatesPut(assignment.name, dict(states)))
        return changes

    def _topic_created(self, name: str, states: Iterable[int]) -> None:
        self._fire("topics")
        self._fire_states(name, states)

    async def set_partition_assignment(self, assignment: TopicAssignment,
                                       lease: ControllerLease | None) -> None:
        async with self._writing():
            self._fence(lease)
            await self._commit([self._assignment_change(assignment)])
            self._fire("topics")

    def set_partition_assignment_now(self, assignment: TopicAssignment) -> None:
        self._commit_now([self._assignment_change(assignment)])
        self._fire("topics")

    def _assignment_change(self, assignment: TopicAssignment) -> _TopicPut:
        topic = self._require(assignment.name)
        if topic.topic_id != assignment.topic_id:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic '{assignment.name}' has another topic id now.")
        validate_assignment(assignment.partitions)
        if len(assignment.partitions) < len(topic.partitions):
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic '{assignment.name}' cannot lose partitions.")
        return _topic_put(assignment)

    async def watch_topics(self, callback: Callback) -> WatchHandle:
        return await self._watch("topics", callback)

    async def topic_configs(self, name: str) -> dict[str, str]:
        topic = self._topics.get(name)
        return dict(topic.configs) if topic is not None else {}

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        async with self._writing():
            self._require(name)
            await self._commit([_ConfigsPut(name, dict(configs))])
            self._configs_set(name, configs)

    def set_topic_configs_now(self, name: str, configs: Mapping[str, str]) -> None:
        self._require(name)
        self._commit_now([_ConfigsPut(name, dict(configs))])
        self._configs_set(name, configs)

    def _configs_set(self, name: str, configs: Mapping[str, str]) -> None:
        for handle, callback in list(self._watchers["configs"].items()):
            self._dispatcher.submit(self._job(handle, callback, name, dict(configs)))

    async def watch_topic_configs(self, callback: Callback) -> WatchHandle:
        return await self._watch("configs", callback, initial=False)

    async def request_topic_deletion(self, name: str) -> None:
        async with self._writing():
            self._require(name)
            if name not in self._pending_deletion:
                await self._commit([_DeletionMark(name)])
                self._fire("deletions")

    async def topics_pending_deletion(self) -> set[str]:
        return set(self._pending_deletion)

    async def watch_topic_deletions(self, callback: Callback) -> WatchHandle:
        return await self._watch("deletions", callback)

    async def delete_topic(self, name: str, lease: ControllerLease) -> None:
        async with self._writing():
            self._fence(lease)
            topic, marked = self._require(name), name in self._pending_deletion
            await self._commit([_TopicDelete(name)])
            self._topic_deleted(name, topic, marked)

    def delete_topic_now(self, name: str) -> None:
        topic, marked = self._require(name), name in self._pending_deletion
        self._commit_now([_TopicDelete(name)])
        self._topic_deleted(name, topic, marked)

    def _topic_deleted(self, name: str, topic: _Topic, marked: bool) -> None:
        self._fire("topics")
        if marked:
            self._fire("deletions")
        self._fire_states(name, topic.states)

    def _require(self, name: str) -> _Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' not found.")
        return topic

    # --- configs of other entities ---
    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        check_entity_type(entity_type)
        return dict(self._entity_configs.get(entity_type, {}).get(name, {}))

    async def set_entity_configs(self, entity_type: str, name: str,
                                 configs: Mapping[str, str]) -> None:
        check_entity_type(entity_type)
        async with self._writing():
            await self._commit([_EntityConfigsPut(entity_type, name, dict(configs))])
            self._fire(f"entity:{entity_type}")

    async def watch_entity_configs(self, entity_type: str, callback: Callback) -> WatchHandle:
        check_entity_type(entity_type)
        return await self._watch(f"entity:{entity_type}", callback)

    # --- partition state ---
    async def partition_states(self, topic: str) -> dict[int, VersionedState]:
        entry = self._topics.get(topic)
        if entry is None:
            return {}
        return {p: VersionedState(s, entry.state_versions[p]) for p, s in entry.states.items()}

    async def create_partition_states(self, topic: str, states: Mapping[int, LeaderAndIsr],
                                      lease: ControllerLease) -> dict[int, int]:
        async with self._writing():
            self._fence(lease)
            entry = self._require(topic)
            for partition in states:
                if partition not in entry.partitions:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"Topic '{topic}' has no partition {partition}.")
                if partition in entry.states:
                    raise StaleVersion(partition_state_path(topic, partition), -1)
            await self._commit([_StatesPut(topic, dict(states))])
            self._fire_states(topic, states)
            return dict.fromkeys(states, 0)

    async def update_partition_state(self, topic: str, partition: int, state: LeaderAndIsr,
                                     expected_version: int,
                                     lease: ControllerLease | None) -> int:
        async with self._writing():
            self._fence(lease)
            entry = self._topics.get(topic)
            if entry is None or partition not in entry.states:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"No state for partition {topic}-{partition}.")
            if entry.state_versions[partition] != expected_version:
                raise StaleVersion(partition_state_path(topic, partition), expected_version)
            await self._commit([_StatesPut(topic, {partition: state})])
            self._fire_states(topic, [partition])
            return entry.state_versions[partition]

    async def partition_states_of(self, partitions: Iterable[tuple[str, int]]
                                  ) -> dict[tuple[str, int], VersionedState]:
        out = {}
        for topic, partition in partitions:
            entry = self._topics.get(topic)
            if entry is not None and partition in entry.states:
                out[(topic, partition)] = VersionedState(entry.states[partition],
                                                         entry.state_versions[partition])
        return out

    async def update_partition_states(self, updates: Sequence[StateUpdate],
                                      lease: ControllerLease | None
                                      ) -> dict[tuple[str, int], StateOutcome]:
        """Every update checked, then one journal write for them all and one watch batch
        per topic."""
        async with self._writing():
            self._fence(lease)
            outcomes: dict[tuple[str, int], StateOutcome] = {}
            touched: dict[str, dict[int, LeaderAndIsr]] = {}
            for topic, partition, state, expected in updates:
                entry = self._topics.get(topic)
                if entry is None or partition not in entry.states:
                    outcomes[(topic, partition)] = KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"No state for partition {topic}-{partition}.")
                elif (entry.state_versions[partition] != expected
                      or partition in touched.get(topic, {})):
                    outcomes[(topic, partition)] = StaleVersion(
                        partition_state_path(topic, partition), expected)
                else:
                    touched.setdefault(topic, {})[partition] = state
            if touched:
                await self._commit([_StatesPut(t, states) for t, states in touched.items()])
                for topic, states in touched.items():
                    entry = self._topics[topic]
                    for partition in states:
                        outcomes[(topic, partition)] = entry.state_versions[partition]
                    self._fire_states(topic, list(states))
            return outcomes

    async def watch_partition_states(self, callback: Callback, *,
                                     whole_batches: bool = False) -> WatchHandle:
        self._dispatcher.start()
        handle = WatchHandle(lambda: self._watchers["states"].pop(handle, None))
        batches = StateBatches(self._dispatcher, callback, lambda: handle.cancelled,
                               whole_batches)
        self._watchers["states"][handle] = batches.add

        async def initial() -> None:
            for name, entry in list(self._topics.items()):
                for partition in list(entry.states):
                    batches.add(name, partition, VersionedState(
                        entry.states[partition], entry.state_versions[partition]))
            await batches.flush()

        await self._dispatcher.run(initial)
        return handle

    def _fire_states(self, topic: str, partitions: Iterable[int]) -> None:
        """Hand the partitions' states as they are now (None: deleted) to every state
        watch; they arrive as one batch per topic (StateBatches)."""
        entry = self._topics.get(topic)
        for add in list(self._watchers["states"].values()):
            for partition in partitions:
                current = None
                if entry is not None and partition in entry.states:
                    current = VersionedState(entry.states[partition],
                                             entry.state_versions[partition])
                add(topic, partition, current)

    # --- ISR change notifications ---
    async def notify_isr_change(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._isr_changes.append(set(partitions))
        self._fire("isr")

    async def watch_isr_changes(self, callback: Callback) -> WatchHandle:
        handle = await self._watch("isr", callback, initial=False)
        if self._isr_changes:
            await self._dispatcher.run(self._job(handle, callback))
        return handle

    async def consume_isr_changes(self) -> set[tuple[str, int]]:
        changes: set[tuple[str, int]] = set().union(*self._isr_changes)
        self._isr_changes.clear()
        return changes

    # --- replicas on failed log dirs: one node has no other replica to lead them ---
    async def report_offline_replicas(self, broker_id: int, broker_epoch: int,
                                      partitions: Iterable[tuple[str, int]]) -> None:
        pass

    async def watch_offline_replicas(self, callback: Callback) -> WatchHandle:
        return WatchHandle()

    # --- reassignment requests: operators of one node have no ZooKeeper to write ---
    async def watch_reassignment_requests(self, callback: Callback) -> WatchHandle:
        return WatchHandle()

    async def clear_reassignment_requests(self, lease: ControllerLease) -> None:
        return None

    # --- producer ids ---
    async def allocate_producer_ids(self, broker_id: int,
                                    count: int = PRODUCER_ID_BLOCK_SIZE) -> range:
        async with self._writing():
            block = range(self._producer_id_next, self._producer_id_next + count)
            await self._commit([_ProducerIds(block.stop)])
            return block

    def add_states_now(self, topic: str, states: Mapping[int, LeaderAndIsr]) -> None:
        """States for new partitions, on the calling thread (EmbeddedStore)."""
        self._require(topic)
        self._commit_now([_StatesPut(topic, dict(states))])
        self._fire_states(topic, states)

    def allocate_producer_ids_now(self, count: int) -> range:
        block = range(self._producer_id_next, self._producer_id_next + count)
        self._commit_now([_ProducerIds(block.stop)])
        return block

    # --- watches ---
    def _snapshot_of(self, kind: str) -> tuple[object, ...]:
        if kind == "brokers":
            return (dict(self._brokers),)
        if kind == "controller":
            return (self._controller,)
        if kind == "topics":
            return ({name: t.assignment(name) for name, t in self._topics.items()},)
        if kind == "deletions":
            return (set(self._pending_deletion),)
        if kind.startswith("entity:"):
            entities = self._entity_configs.get(kind.partition(":")[2], {})
            return ({name: dict(c) for name, c in entities.items()},)
        return ()

    async def _watch(self, kind: str, callback: Callback, initial: bool = True) -> WatchHandle:
        self._dispatcher.start()  # idempotent: watches work even before start()
        handle = WatchHandle(lambda: self._watchers[kind].pop(handle, None))
        self._watchers[kind][handle] = callback
        if initial:
            await self._dispatcher.run(self._level_job(kind, handle, callback))
        return handle

    def _fire(self, kind: str) -> None:
        self.generation += 1
        for handle, callback in list(self._watchers[kind].items()):
            if kind == "isr":
                self._dispatcher.submit(self._job(handle, callback), key=(handle, kind))
            else:
                self._dispatcher.submit(self._level_job(kind, handle, callback),
                                        key=(handle, kind))

    def _level_job(self, kind: str, handle: WatchHandle, callback: Callback):
        async def job() -> None:
            if not handle.cancelled:  # the value when the callback runs: bursts coalesce
                await invoke(callback, *self._snapshot_of(kind))
        return job

    def _job(self, handle: WatchHandle, callback: Callback, *args: object):
        async def job() -> None:
            if not handle.cancelled:
                await invoke(callback, *args)
        return job

    # --- writing: journal frames, applied once durable ---
    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        """Hold the write lock: checks made inside see every earlier write applied, and
        no later write is checked before this one is applied."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            yield

    def _frame(self, changes: list[_Change]) -> bytes:
        if self._broken is not None:
            raise CoordinationUnavailable(self._broken)
        return frame(msgspec.json.encode(_Frame(self._seq + 1, changes)))

    async def _commit(self, changes: list[_Change]) -> None:
        """Write the changes as one journal frame on a worker thread, then apply them.
        Shielded: a cancelled caller must not leave a durable change unapplied."""
        data = self._frame(changes)
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._append, data)
            self._applied(changes)
            snapshot = self._snapshot() if self._compaction_due() else None
            if snapshot is not None:
                await anyio.to_thread.run_sync(self._compact, snapshot)

    def _commit_now(self, changes: list[_Change]) -> None:
        """_commit on the calling thread (EmbeddedStore; not while an async write runs)."""
        if self._lock is not None and self._lock.locked():
            raise RuntimeError("a synchronous metadata write while an async one runs")
        self._append(self._frame(changes))
        self._applied(changes)
        if self._compaction_due():
            self._compact(self._snapshot())

    def _append(self, data: bytes) -> None:
        before = self._journal.size
        try:
            self._journal.append(data)
        except OSError as exc:
            self._broken = f"the metadata journal {self._journal.path} failed a write: {exc}"
            try:  # leave no half frame for a good one to follow (it would read as corrupt)
                self._journal.truncate(before)
            except OSError:
                pass
            raise CoordinationUnavailable(self._broken) from exc

    def _applied(self, changes: list[_Change]) -> None:
        self._seq += 1
        for change in changes:
            self._apply(change)

    def _apply(self, change: _Change) -> None:
        """One change to the state in memory (a write, or a frame replayed on load)."""
        self.generation += 1
        if isinstance(change, _StatesPut):
            entry = self._topics[change.name]
            for partition, state in change.states.items():
                entry.state_versions[partition] = (entry.state_versions[partition] + 1
                                                   if partition in entry.states else 0)
                entry.states[partition] = state
        elif isinstance(change, _TopicPut):
            topic = self._topics.get(change.name)
            partitions = {p: part.replicas for p, part in enumerate(change.partitions)}
            adding = {p: part.adding_replicas for p, part in enumerate(change.partitions)
                      if part.adding_replicas}
            removing = {p: part.removing_replicas for p, part in enumerate(change.partitions)
                        if part.removing_replicas}
            if topic is None:
                self._topics[change.name] = _Topic(
                    topic_id=change.topic_id, partitions=partitions, adding=adding,
                    removing=removing, configs={}, states={}, state_versions={})
            else:
                topic.partitions, topic.adding, topic.removing = partitions, adding, removing
        elif isinstance(change, _ConfigsPut):
            self._topics[change.name].configs = dict(change.configs)
        elif isinstance(change, _TopicDelete):
            del self._topics[change.name]
            self._pending_deletion.discard(change.name)
        elif isinstance(change, _DeletionMark):
            self._pending_deletion.add(change.name)
        elif isinstance(change, _EntityConfigsPut):
            self._entity_configs.setdefault(change.entity_type, {})[change.name] = \
                dict(change.configs)
        elif isinstance(change, _ProducerIds):
            self._producer_id_next = change.next
        elif isinstance(change, _ControllerEpoch):
            self._controller_epoch = change.epoch

    def _compaction_due(self) -> bool:
        return self._journal.size > max(COMPACT_MIN_BYTES, self._snapshot_bytes)

    def _compact(self, snapshot: _FileV2) -> None:
        """Write the state as the snapshot, then empty the journal (thread-safe: it
        touches only the files and the journal, and runs under the write lock)."""
        self._write_snapshot(snapshot)
        self._journal.reset()

    # --- the files ---
    def _open_existing(self) -> None:
        state, version = _read_file(self.path)
        self._snapshot_bytes = self.path.stat().st_size
        self._load(state)
        self._seq = state.journal_seq
        for payload in self._journal.recover():
            try:
                entry = msgspec.json.decode(payload, type=_Frame)
            except msgspec.DecodeError as exc:
                raise MalformedZNode(str(self._journal.path), payload, str(exc)) from exc
            if entry.seq <= self._seq:
                continue  # already in the snapshot (a crash between compaction's steps)
            if entry.seq != self._seq + 1:
                raise MalformedZNode(str(self._journal.path), payload,
                                     f"frame {entry.seq} follows frame {self._seq}")
            try:
                self._applied(entry.changes)
            except KeyError as exc:
                raise MalformedZNode(str(self._journal.path), payload,
                                     f"a change to unknown topic {exc}") from exc
        for topic in self._topics.values():
            # versions live in memory: a restarted node starts them again
            topic.state_versions = dict.fromkeys(topic.states, 0)
        if version != FILE_VERSION or self._compaction_due():
            self._compact(self._snapshot())  # an old format is rewritten as the current

    def _load(self, state: _FileV2) -> None:
        self._cluster_id = state.cluster_id
        self._producer_id_next = state.producer_id_next
        self._controller_epoch = state.controller_epoch
        self._pending_deletion = set(state.pending_deletion)
        self._entity_configs = {t: {n: dict(c) for n, c in e.items()}
                                for t, e in state.entity_configs.items()}
        for raw in state.topics:
            states = {p: part.state for p, part in enumerate(raw.partitions)
                      if part.state is not None}
            self._topics[raw.name] = _Topic(
                topic_id=raw.topic_id,
                partitions={p: part.replicas for p, part in enumerate(raw.partitions)},
                adding={p: part.adding_replicas for p, part in enumerate(raw.partitions)
                        if part.adding_replicas},
                removing={p: part.removing_replicas for p, part in enumerate(raw.partitions)
                          if part.removing_replicas},
                configs=dict(raw.configs), states=states,
                state_versions=dict.fromkeys(states, 0))

    def _snapshot(self) -> _FileV2:
        """The state as the snapshot file holds it (built on the loop: a consistent view)."""
        return _FileV2(
            version=FILE_VERSION, cluster_id=self._cluster_id,
            producer_id_next=self._producer_id_next, controller_epoch=self._controller_epoch,
            pending_deletion=sorted(self._pending_deletion),
            entity_configs={t: {n: dict(c) for n, c in e.items()}
                            for t, e in self._entity_configs.items()},
            journal_seq=self._seq,
            topics=[_TopicV2(name=name, topic_id=t.topic_id, configs=dict(t.configs),
                             partitions=[
                _PartitionV2(replicas=t.partitions[p], adding_replicas=t.adding.get(p, []),
                             removing_replicas=t.removing.get(p, []), state=t.states.get(p))
                for p in range(len(t.partitions))])
                for name, t in self._topics.items()])

    def _write_snapshot(self, snapshot: _FileV2) -> None:
        data = msgspec.json.format(msgspec.json.encode(snapshot), indent=1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._snapshot_bytes = len(data)


def _topic_put(assignment: TopicAssignment) -> _TopicPut:
    return _TopicPut(assignment.name, assignment.topic_id, [
        _PartitionV2(replicas=list(assignment.partitions[p]),
                     adding_replicas=list(assignment.adding_replicas.get(p, [])),
                     removing_replicas=list(assignment.removing_replicas.get(p, [])))
        for p in range(len(assignment.partitions))])


# --- the old synchronous view ------------------------------------------------------------

class EmbeddedStore:
    """The broker's pre-cluster interface over an EmbeddedBackend: topics as TopicRecords,
    every partition led by this broker. Same state and file as `self.backend`, so watches
    on the backend see changes made here."""

    def __init__(self, data_dir: str | Path, broker_id: int) -> None:
        self.backend = EmbeddedBackend(data_dir, broker_id)
        self.broker_id = broker_id
        self.path = self.backend.path
        self._records: dict[str, TopicRecord] = {}
        self._generation = -1

    @property
    def cluster_id(self) -> str:
        return self.backend.cluster_id

    def topics(self) -> dict[str, TopicRecord]:
        backend = self.backend
        if backend.generation != self._generation:
            self._records = {name: self._record(name, t) for name, t in backend._topics.items()}
            self._generation = backend.generation
        return self._records

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicRecord:
        me = self.broker_id
        epoch = self.backend._controller_epoch
        self.backend.create_topic_now(
            TopicAssignment(name=name, topic_id=uuid.uuid4(),
                            partitions={p: [me] for p in range(partitions)}),
            configs,
            {p: LeaderAndIsr(controller_epoch=epoch, leader=me, leader_epoch=0, isr=[me])
             for p in range(partitions)})
        return self.topics()[name]

    def delete_topic(self, name: str) -> TopicRecord:
        record = self._require(name)
        self.backend.delete_topic_now(name)
        return record

    def add_partitions(self, name: str, total: int) -> TopicRecord:
        record = self._require(name)
        topic = self.backend._topics[name]
        me = self.broker_id
        partitions = dict(topic.partitions)
        new = range(len(partitions), total)
        partitions.update((p, [me]) for p in new)
        self.backend.set_partition_assignment_now(TopicAssignment(
            name=name, topic_id=record.topic_id, partitions=partitions))
        epoch = self.backend._controller_epoch
        self.backend.add_states_now(name, {
            p: LeaderAndIsr(controller_epoch=epoch, leader=me, leader_epoch=0, isr=[me])
            for p in new})
        return self.topics()[name]

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicRecord:
        self.backend.set_topic_configs_now(name, configs)
        return self.topics()[name]

    def allocate_producer_ids(self, count: int) -> range:
        """A block of producer ids no earlier or later call hands out, across restarts."""
        return self.backend.allocate_producer_ids_now(count)

    def _require(self, name: str) -> TopicRecord:
        record = self.topics().get(name)
        if record is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' not found.")
        return record

    @staticmethod
    def _record(name: str, topic: _Topic) -> TopicRecord:
        partitions = []
        for p in range(len(topic.partitions)):
            state = topic.states.get(p)
            partitions.append(PartitionState(
                leader=state.leader if state else -1,
                leader_epoch=state.leader_epoch if state else 0,
                replicas=list(topic.partitions[p]),
                isr=list(state.isr) if state else []))
        return TopicRecord(name=name, topic_id=topic.topic_id, partitions=partitions,
                           configs=dict(topic.configs))
