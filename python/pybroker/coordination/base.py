"""The coordination interface every metadata backend implements.

`CoordinationBackend` is what the broker, the controller and the replica manager use:
an async interface with watches and versioned (conditional) writes, implemented by
`embedded.EmbeddedBackend` (one node, a file in the data dir) and
`zookeeper.ZooKeeperBackend` (kazoo, Kafka's znode layout). It is called from an
asyncio event loop (anyio's asyncio backend); no method blocks the loop on ZooKeeper.

Writes fall in two groups, as in Kafka's ZooKeeper mode:
  * controller writes take the `ControllerLease` returned by `try_elect_controller`
    and are fenced by the controller epoch: they run as one ZooKeeper transaction with
    a check on /controller_epoch's version, so a deposed controller's write fails with
    ControllerMoved instead of overwriting its successor's decisions;
  * writes any broker or admin makes (register itself, topic configs, deletion requests,
    ISR change notifications, producer id blocks) take no lease. The writes either kind
    makes take `lease` without a default, so a call that forgets it fails instead of
    writing unfenced. A partition leader
    updates its own ISR with `update_partition_state(..., lease=None)`, conditional on
    the state's version as Kafka's leaders did.

Watches (`watch_*`) take a callback (function or coroutine function) run on the event
loop by one dispatcher task, one at a time, in order (see watches.py). State watches are
level-triggered: the callback first gets the current value, then the new value after
every change (several quick changes may arrive as one). `watch_topic_configs` and
`watch_isr_changes` report events: they fire for changes made after registration.
Every watch returns a WatchHandle; cancel() stops it.

Errors: KafkaError with Kafka's codes (TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT), ControllerMoved (NOT_CONTROLLER), StaleVersion,
BrokerIdInUse, MalformedZNode, CoordinationUnavailable; see errors.py.

The sync `MetadataStore` protocol and `TopicRecord` at the end are the broker's old view
of the embedded store, kept until callers move to `CoordinationBackend`."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from msgspec import Struct

from pybroker.coordination.watches import Callback, WatchHandle
from pybroker.coordination.znodes import BrokerRegistration, LeaderAndIsr
from pybroker.errors import ErrorCode, KafkaError

__all__ = [
    "BrokerRegistration", "CoordinationBackend", "ControllerLease", "LeaderAndIsr",
    "StateOutcome", "StateUpdate", "TopicAssignment", "VersionedState", "WatchHandle",
    "validate_topic_name",
]

#: Kafka's producer id block size (ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE)
PRODUCER_ID_BLOCK_SIZE = 1000

#: entity types whose configs live under /config besides topics (Kafka's ConfigType
#: names); the cluster-wide broker default is the broker entity "<default>"
ENTITY_TYPES = ("brokers", "users", "clients", "ips", "groups")

TOPIC_NAME_MAX = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str | None) -> None:
    """Kafka's Topic.validate: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > TOPIC_NAME_MAX:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {TOPIC_NAME_MAX} characters",
        )
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


def check_entity_type(entity_type: str) -> None:
    if entity_type not in ENTITY_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r} "
                         f"(one of {', '.join(ENTITY_TYPES)})")


def validate_assignment(partitions: Mapping[int, list[int]]) -> None:
    """Partitions are numbered 0..n-1 and each has distinct replicas; anything else is
    INVALID_REPLICA_ASSIGNMENT (the broker ids themselves are the caller's to check)."""
    if sorted(partitions) != list(range(len(partitions))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Partitions must be numbered 0..{len(partitions) - 1}, got "
                         f"{sorted(partitions)}")
    for partition, replicas in partitions.items():
        if not replicas or len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Invalid replica assignment {replicas} for partition {partition}")


class TopicAssignment(Struct, frozen=True, kw_only=True):
    """A topic's id and its replica assignment (/brokers/topics/<t>). The first replica
    of a partition is its preferred leader."""

    name: str
    topic_id: uuid.UUID
    #: partition -> replica broker ids
    partitions: dict[int, list[int]]
    #: partition -> replicas being added / removed by a reassignment (usually empty)
    adding_replicas: dict[int, list[int]] = {}
    removing_replicas: dict[int, list[int]] = {}


class ControllerLease(Struct, frozen=True, kw_only=True):
    """Proof of having won an election: the controller epoch this broker holds and the
    version of /controller_epoch it wrote, which fences every controller write."""

    broker_id: int
    epoch: int
    epoch_zk_version: int


class VersionedState(NamedTuple):
    """A partition's leader/ISR and its znode version, the `expected_version` for the
    next conditional update."""

    state: LeaderAndIsr
    version: int


class StateUpdate(NamedTuple):
    """One partition's conditional state write in a batch (update_partition_states)."""

    topic: str
    partition: int
    state: LeaderAndIsr
    expected_version: int


#: a batch write's outcome for one partition: its new version, or why it was not
#: written (StaleVersion; KafkaError UNKNOWN_TOPIC_OR_PARTITION when its state is gone)
StateOutcome = int | Exception


class CoordinationBackend(Protocol):
    """Cluster metadata with watches and conditional writes. See the module docstring
    for the rules every method follows."""

    # --- lifecycle and session ---
    @property
    def cluster_id(self) -> str:
        """The cluster id (/cluster/id), created by the first broker; valid after start()."""
        ...

    async def start(self) -> None:
        """Connect (ZooKeeper: create the chroot and Kafka's persistent paths), read or
        create the cluster id, start the watch dispatcher."""
        ...

    async def close(self) -> None:
        """Stop watches, drop this broker's ephemerals (registration, /controller)."""
        ...

    def on_session_lost(self, callback: Callback) -> WatchHandle:
        """callback() when the ZooKeeper session expired: this broker's ephemerals (its
        registration, /controller) are gone and any ControllerLease is void. Never fires
        for the embedded backend."""
        ...

    async def settle(self) -> None:
        """Wait until every callback already due has run (changes ZooKeeper has not yet
        reported are not included). For orderly shutdown and tests."""
        ...

    def on_session_reestablished(self, callback: Callback) -> WatchHandle:
        """callback() once a new session is up after an expiry; the backend has already
        re-registered this store's brokers and re-armed every watch by then. A former
        controller must run try_elect_controller again (Kafka does not re-create
        /controller)."""
        ...

    # --- brokers ---
    async def register_broker(self, broker_id: int, registration: BrokerRegistration) -> int:
        """Create the ephemeral /brokers/ids/<id>; BrokerIdInUse if a live broker (or this
        store already) holds the id. Re-created after a session re-establishment.
        Returns the broker epoch (Kafka's: the registration znode's creation zxid)."""
        ...

    async def unregister_broker(self, broker_id: int) -> None:
        """Remove this store's registration of `broker_id` (controlled shutdown)."""
        ...

    @property
    def session_id(self) -> int | None:
        """This store's ZooKeeper session (it owns the broker's ephemerals); None for the
        embedded store, which has no sessions."""
        ...

    async def remove_stale_registration(self, broker_id: int, session: int) -> bool:
        """A restarted broker's claim on what its previous process left: delete
        /brokers/ids/<id>, and /controller, when the ZooKeeper session `session` (the
        previous process's, which the broker kept in its own data dir) still owns them,
        instead of waiting for that session to expire. True when the registration was
        removed (register again now). The embedded store: False."""
        ...

    async def live_brokers(self) -> dict[int, BrokerRegistration]:
        ...

    async def broker_epochs(self) -> dict[int, int]:
        """Each live broker's epoch: it grows when a broker registers again, so a broker
        that bounced between two looks shows a new epoch (Kafka: STALE_BROKER_EPOCH)."""
        ...

    async def broker_epoch(self, broker_id: int) -> int | None:
        """One broker's epoch as broker_epochs gives it, None when it is not registered:
        one read of its own registration (a controlled shutdown's check, on both sides)."""
        ...

    async def watch_brokers(self, callback: Callback) -> WatchHandle:
        """callback(dict[int, BrokerRegistration]) with the live brokers, then on change."""
        ...

    async def watch_broker_epochs(self, callback: Callback) -> WatchHandle:
        """As watch_brokers, with each broker's epoch read in the same look:
        callback(dict[int, tuple[BrokerRegistration, int]]). A broker that registered
        again between two looks shows a new epoch under the same id."""
        ...

    # --- controller ---
    async def try_elect_controller(self, broker_id: int) -> ControllerLease | None:
        """Create /controller and increment /controller_epoch in one transaction
        (Kafka's registerControllerAndIncrementControllerEpoch); None when another
        broker is controller or won the race. If this store (session) already holds
        /controller for `broker_id`, the lease for the current epoch."""
        ...

    async def controller_id(self) -> int | None:
        ...

    async def controller_epoch(self) -> tuple[int, int]:
        """(epoch, znode version) of /controller_epoch; (0, -1) before any election."""
        ...

    async def watch_controller(self, callback: Callback) -> WatchHandle:
        """callback(int | None): the controller's broker id, then on every change."""
        ...

    async def resign(self, lease: ControllerLease) -> None:
        """Delete /controller if it is still this lease's (a no-op otherwise)."""
        ...

    async def remove_dead_controller(self, broker_id: int) -> bool:
        """Delete /controller if `broker_id` holds it and no controller was elected since
        (checked against /controller_epoch in the same transaction): its process was
        found gone, so the brokers elect another without waiting for its session to
        expire. True when deleted. Kafka's operators do the same by hand (`delete
        /controller` in zookeeper-shell) to move the controller."""
        ...

    # --- topics ---
    async def topic_assignments(self) -> dict[str, TopicAssignment]:
        ...

    async def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str],
                           lease: ControllerLease | None) -> None:
        """Write the topic's configs and assignment atomically (fenced when a lease is
        given). TOPIC_ALREADY_EXISTS if it exists. Partition states are the controller's
        to create (create_partition_states)."""
        ...

    async def set_partition_assignment(self, assignment: TopicAssignment,
                                       lease: ControllerLease | None) -> None:
        """Replace the topic's assignment (CreatePartitions adds partitions this way).
        UNKNOWN_TOPIC_OR_PARTITION if the topic (with this topic id) does not exist."""
        ...

    async def watch_topics(self, callback: Callback) -> WatchHandle:
        """callback(dict[str, TopicAssignment]) with every topic, then after each topic
        creation, deletion or assignment change."""
        ...

    async def topic_configs(self, name: str) -> dict[str, str]:
        """The topic's config overrides ({} when none)."""
        ...

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides and announce the change (/config/changes).
        UNKNOWN_TOPIC_OR_PARTITION if the topic does not exist."""
        ...

    async def watch_topic_configs(self, callback: Callback) -> WatchHandle:
        """callback(name, dict[str, str]) for each set_topic_configs after registration."""
        ...

    async def request_topic_deletion(self, name: str) -> None:
        """Mark the topic for deletion (/admin/delete_topics/<t>); idempotent.
        UNKNOWN_TOPIC_OR_PARTITION if the topic does not exist."""
        ...

    async def topics_pending_deletion(self) -> set[str]:
        ...

    async def watch_topic_deletions(self, callback: Callback) -> WatchHandle:
        """callback(set[str]) with the topics marked for deletion, then on change."""
        ...

    async def delete_topic(self, name: str, lease: ControllerLease) -> None:
        """Remove the topic's znodes (assignment, partition states), its configs and its
        deletion mark. UNKNOWN_TOPIC_OR_PARTITION if it does not exist."""
        ...

    # --- configs of other entities (brokers; users and clients later) ---
    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        """/config/<entity_type>/<name> ({} when none); entity_type is Kafka's ConfigType
        name ("brokers", "users", "clients"); the broker default is "<default>"."""
        ...

    async def set_entity_configs(self, entity_type: str, name: str,
                                 configs: Mapping[str, str]) -> None:
        """Replace the entity's configs and announce the change (/config/changes)."""
        ...

    async def watch_entity_configs(self, entity_type: str, callback: Callback) -> WatchHandle:
        """callback(dict name -> configs) with every entity of the type, then on change."""
        ...

    # --- partition state ---
    async def partition_states(self, topic: str) -> dict[int, VersionedState]:
        """The topic's partitions that have a state, with versions ({} for none)."""
        ...

    async def create_partition_states(self, topic: str, states: Mapping[int, LeaderAndIsr],
                                      lease: ControllerLease) -> dict[int, int]:
        """Create the state of new partitions (fenced); returns their versions (0).
        KafkaError(UNKNOWN_TOPIC_OR_PARTITION) if the topic is gone, StaleVersion if a
        state already exists."""
        ...

    async def update_partition_state(self, topic: str, partition: int, state: LeaderAndIsr,
                                     expected_version: int,
                                     lease: ControllerLease | None) -> int:
        """Write the state if its version is still `expected_version` (else StaleVersion);
        with a lease, also fenced by the controller epoch (else ControllerMoved).
        Returns the new version."""
        ...

    async def partition_states_of(self, partitions: Iterable[tuple[str, int]]
                                  ) -> dict[tuple[str, int], VersionedState]:
        """The states of these partitions, of any topics, read together (ZooKeeper: in
        multiReads); a partition without a state is left out."""
        ...

    async def update_partition_states(self, updates: Sequence[StateUpdate],
                                      lease: ControllerLease | None
                                      ) -> dict[tuple[str, int], StateOutcome]:
        """Many update_partition_state calls in as few writes as fit: each partition's
        write is still conditional on its own version (and, with a lease, fenced by the
        controller epoch). ZooKeeper: one multi per batch of states (bounded in
        operations and bytes, under jute.maxbuffer), the multis sent together; a multi
        failing on one partition's version is retried without it. The outcome per
        partition: its new version, StaleVersion, or KafkaError(UNKNOWN_TOPIC_OR_PARTITION).
        ControllerMoved is raised when the lease's fence failed (writes of earlier
        batches may have happened: each was fenced, by a lease that held then)."""
        ...

    async def watch_partition_states(self, callback: Callback, *,
                                     whole_batches: bool = False) -> WatchHandle:
        """callback(topic, {partition: VersionedState | None}) with every partition state
        of every topic, then with the changes; None when the state is deleted. Changes
        seen together come as one call per topic (a controller's batch of a topic's
        states is applied once, not once per partition); with `whole_batches`, as one
        call for every topic: callback({topic: {partition: VersionedState | None}}).
        ZooKeeper holds one watch per state znode (plus one per topic's partitions list)."""
        ...

    # --- ISR change notifications (leader -> controller) ---
    async def notify_isr_change(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Tell the controller these partitions' ISR changed (a sequential znode)."""
        ...

    async def watch_isr_changes(self, callback: Callback) -> WatchHandle:
        """callback() whenever unconsumed ISR change notifications exist."""
        ...

    async def consume_isr_changes(self) -> set[tuple[str, int]]:
        """Read and delete the pending notifications; the partitions they name."""
        ...

    # --- replicas on failed log dirs (broker -> controller) ---
    async def report_offline_replicas(self, broker_id: int, broker_epoch: int,
                                      partitions: Iterable[tuple[str, int]]) -> None:
        """Publish every partition of this broker whose log dir failed, for its current
        registration (replaces what was published before; gone with the session)."""
        ...

    async def watch_offline_replicas(self, callback: Callback) -> WatchHandle:
        """callback({broker: OfflineReplicas}) with every broker's published offline
        replicas, then whenever they change. Never fires for the embedded backend (one
        node: no other replica could lead)."""
        ...

    # --- reassignment requests written to the store (/admin/reassign_partitions) ---
    async def watch_reassignment_requests(self, callback: Callback) -> WatchHandle:
        """callback(dict[(topic, partition), replicas]) when moves are requested
        through the store (an operator writing /admin/reassign_partitions); never
        fires for the embedded backend."""
        ...

    async def clear_reassignment_requests(self, lease: ControllerLease) -> None:
        """Remove the request once the controller has started its moves (fenced)."""
        ...

    # --- producer ids ---
    async def allocate_producer_ids(self, broker_id: int,
                                    count: int = PRODUCER_ID_BLOCK_SIZE) -> range:
        """A block of `count` producer ids no other call (on any broker) gets, ever
        (compare-and-set on /latest_producer_id_block)."""
        ...


# --- the broker's old, synchronous view of the embedded store (to be removed) ---

@dataclasses.dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclasses.dataclass
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    #: per-topic config overrides as given (strings), validated on the way in
    configs: dict[str, str]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


class MetadataStore(Protocol):
    """The old sync interface (EmbeddedStore); new code uses CoordinationBackend.
    Methods raise KafkaError with Kafka's codes (TOPIC_ALREADY_EXISTS, ...)."""

    cluster_id: str

    def topics(self) -> dict[str, TopicRecord]: ...

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicRecord: ...

    def delete_topic(self, name: str) -> TopicRecord: ...

    def add_partitions(self, name: str, total: int) -> TopicRecord: ...

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicRecord: ...

    def allocate_producer_ids(self, count: int) -> range: ...
