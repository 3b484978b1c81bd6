"""The replica manager: every partition this broker holds a replica of, the
role it plays for each (leader or follower), and the way metadata changes
reach them (Kafka's ReplicaManager.becomeLeaderOrFollower).

Whoever learns of a topic's partition states — the local controller of a
single node, or the cluster's controller through the coordination store —
calls `apply_topic`; the manager opens the logs this broker is assigned and
makes each partition leader or follower at the state's leader epoch."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Generator, Iterable, Mapping
from typing import NamedTuple

import anyio
import anyio.abc

from pybroker._core import assign_leader_epochs
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.errors import ErrorCode, KafkaError
from pybroker.log.manager import LogManager, UnreadablePartitionMetadata
from pybroker.log.partition import Partition
from pybroker.purgatory import Purgatory
from pybroker.replica.fetcher import ReplicaFetcherManager
from pybroker.replica.partition import ReplicaPartition
from pybroker.replica.throttle import ReplicationQuota, throttled

log = logging.getLogger(__name__)

#: the longest apply_topic_async runs before letting other tasks in
APPLY_SLICE_S = 0.01


class _LeadAt(NamedTuple):
    """A step of _apply_steps: record `epoch` at the log end of a partition about to be
    led here (the leader-epoch checkpoint's write and fsync), where it may run off the
    loop: the partition is not led here now and not fetched (its fetcher was removed
    first), so nothing appends to its log meanwhile; it starts serving as leader only
    after this returned, so never under an epoch the checkpoint does not hold yet."""

    partition: ReplicaPartition
    epoch: int

    def run(self) -> None:
        log = self.partition.log.log
        log.assign_leader_epoch(self.epoch, log.log_end_offset)

    def try_run(self) -> None:
        """run(), leaving a failure to make_leader on the loop, which records the
        epoch itself when it is not recorded yet (and raises there, as it always did)."""
        try:
            self.run()
        except Exception as exc:  # noqa: BLE001 - handled again on the loop
            log.debug("recording epoch %d of %s-%d on a worker thread: %s", self.epoch,
                      self.partition.topic, self.partition.index, exc)


_Step = int | _LeadAt | None

#: leader-epoch checkpoints written side by side: each is a write, an fsync, a rename
#: and an fsync of its dir, a few ms on a busy disk; one after another, a broker taking
#: over 1,000 leaderships waited seconds for them, while concurrent fsyncs overlap
#: their device flushes (500 checkpoints on this loaded machine: 3.4 s one at a time,
#: 0.66 s eight at a time, 0.44 s thirty-two at a time)
EPOCH_WRITERS = 16


def _record_epochs(steps: list[_LeadAt]) -> None:
    """Run the steps (a worker thread's call): one Rust call writes every checkpoint,
    EPOCH_WRITERS at a time, without taking the GIL back between them. With a Python
    thread per checkpoint each took the GIL twice, and while the event loop held it
    (serving fetches through the takeover) every handover could wait the
    interpreter's switch interval (issue 25). A failure is left to make_leader on the
    loop, as _LeadAt.try_run leaves it."""
    if len(steps) == 1:
        steps[0].try_run()
        return
    errors = assign_leader_epochs([step.partition.log.log for step in steps],
                                  [step.epoch for step in steps], EPOCH_WRITERS)
    for step, exc in zip(steps, errors, strict=True):
        if exc is not None:
            log.debug("recording epoch %d of %s-%d on a worker thread: %s", step.epoch,
                      step.partition.topic, step.partition.index, exc)


class ReplicaManager:
    def __init__(self, broker_id: int, logs: LogManager, purgatory: Purgatory,
                 fetchers: ReplicaFetcherManager) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.purgatory = purgatory
        self.fetchers = fetchers
        self.partitions: dict[tuple[str, int], ReplicaPartition] = {}
        #: called when a follower may join an ISR (the ISR manager wakes up)
        #: told of a partition whose follower outside the ISR has caught up
        self.on_isr_candidate: Callable[[ReplicaPartition], None] = _ignore
        #: called with (topic, partition, leads) when this broker starts or stops
        #: leading a partition (the group coordinator follows its offsets partitions)
        self.leadership_listeners: list[Callable[[str, int, bool], None]] = []
        #: whether the cluster's metadata has the partition (set by the broker): one it
        #: has but this broker does not host answers NOT_LEADER_OR_FOLLOWER, as Kafka's
        #: ReplicaManager.getPartitionOrError, so the client looks for its new place
        self.known_partition: Callable[[str, int], bool] = _unknown
        #: partitions not assigned here whose dirs were looked for (stray logs)
        self._stray_checked: set[tuple[str, int]] = set()
        #: partitions on failed log dirs already stopped (take_offline)
        self._stopped_offline: set[tuple[str, int]] = set()
        #: in controlled shutdown: a partition this broker follows stops being fetched
        #: once the controller took it out of the ISR (Kafka's StopReplica to the broker
        #: in controlled shutdown), or its leader, seeing it caught up, would take it
        #: back in and acks=all would wait for a broker about to stop
        self.shutting_down = False
        #: leaderships taken on and given up since the start (for the publisher's log)
        self.leadership_changes = (0, 0)
        #: time spent recording the leader epochs of takeovers (for the publisher's log)
        self.epochs_recording_s = 0.0
        #: leader.replication.throttled.rate over the throttled replicas' traffic
        self.leader_quota = ReplicationQuota(
            lambda: logs.config["leader.replication.throttled.rate"])
        #: topics whose last apply raised: applied whole the next time, not only the
        #: partitions whose states changed
        self._apply_failed: set[str] = set()
        #: partitions this broker is taking the lead of (a state naming it leader is
        #: being applied: fetching stopped, leader epoch being recorded): set once the
        #: state is applied, led or not. Produce requests for them wait for it
        #: (until_taken_over) rather than being refused
        self._takeovers: dict[tuple[str, int], anyio.Event] = {}

    def get(self, topic: str, index: int) -> ReplicaPartition | None:
        return self.partitions.get((topic, index))

    def leader_for(self, topic: str, index: int,
                   current_leader_epoch: int = -1) -> ReplicaPartition:
        """The partition, when this broker leads it at the epoch the client knows;
        else the KafkaError a client gets (UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH)."""
        partition = self._hosted(topic, index)
        partition.check_leader(current_leader_epoch)
        return partition

    def replica_for(self, topic: str, index: int,
                    current_leader_epoch: int = -1) -> ReplicaPartition:
        """The partition when this broker holds a replica of it, leader or follower
        of a known leader, at the epoch the client knows (a consumer may read from a
        follower, KIP-392); else the client's KafkaError as in leader_for."""
        partition = self._hosted(topic, index)
        partition.check_replica(current_leader_epoch)
        return partition

    def _hosted(self, topic: str, index: int) -> ReplicaPartition:
        partition = self.partitions.get((topic, index))
        if partition is not None:
            if partition.log.offline:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 "The log dir of this topic-partition is offline.")
            return partition
        if self.known_partition(topic, index):
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             "This server is not a replica of this topic-partition.")
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         "This server does not host this topic-partition.")

    def apply_topic(self, record: TopicRecord, versions: list[int] | None = None) -> None:
        """Take on the topic's partition states (with their store versions, when
        the store keeps them): open the logs of partitions assigned to this broker,
        become leader or follower at each state's epoch, and let go of partitions
        no longer assigned here."""
        steps = self._apply_steps(record, versions)
        reply: Partition | UnreadablePartitionMetadata | None = None
        while True:
            try:
                need = steps.send(reply)
            except StopIteration:
                return
            reply = None
            if isinstance(need, _LeadAt):
                need.run()
            elif need is not None:
                try:
                    reply = self.logs.open_partition(record, need)
                except UnreadablePartitionMetadata as exc:
                    reply = exc

    async def apply_topic_async(self, record: TopicRecord,
                                versions: list[int] | None = None) -> None:
        """apply_topic without holding the event loop: new logs are opened on a worker
        thread (their files and fsyncs; a 50-partition topic opened on the loop held
        every connection up for seconds on a loaded machine), and so are the leader
        epochs of partitions this broker takes the lead of from no leader (a new
        topic's) or from another broker (a failover, a controlled shutdown, a preferred
        election): the epoch checkpoint's fsyncs, a few ms each, held the loop for
        hundreds of ms when a broker took on hundreds of leaderships (issue 25). The
        whole topic goes in one thread call (_prepare); the loop gets a turn whenever
        APPLY_SLICE_S has gone. Requests meanwhile
        see the partitions not yet opened as not hosted here, which clients retry, as
        they do while Kafka's LeaderAndIsr is on its way."""
        await self.apply_topics_async([(record, versions)])

    async def apply_topics_async(self, changes: list[tuple[TopicRecord, list[int] | None]],
                                 applied: Callable[[TopicRecord], None] | None = None,
                                 only: Mapping[str, Collection[int]] | None = None
                                 ) -> None:
        """apply_topic_async for several topics in one pass (Kafka's becomeLeaderOrFollower
        over one LeaderAndIsr request): the leader epochs of every partition taken over
        here, whatever its topic, are recorded in one worker-thread call, their
        checkpoints written and fsynced side by side (_record_epochs), then each topic is
        applied in turn; `applied(record)` after each.

        With `only`, a topic named there is applied for those partitions alone (the
        ones whose states changed; the record still has them all, for the cache): a
        controlled shutdown's batches change a third of a topic's states at a time, and
        re-applying the other two thirds unchanged was most of the pass (issue 25). A
        topic whose last apply failed is applied whole again."""
        subsets = self._subsets([record for record, _ in changes], only)
        taking = self._start_takeovers([record for record, _ in changes], subsets)
        try:
            leading = self._stop_fetching_takeovers([record for record, _ in changes],
                                                    subsets)
            if leading:
                started = time.monotonic()
                await anyio.to_thread.run_sync(_record_epochs, leading)
                self.epochs_recording_s += time.monotonic() - started
            failed: Exception | None = None
            ahead = _OpensAhead(self)
            async with anyio.create_task_group() as tg:
                for position, (record, versions) in enumerate(changes):
                    upcoming = changes[position + 1][0] if position + 1 < len(changes) else None
                    try:
                        await ahead.done(record.name)
                        await self._apply_one(
                            record, versions, subsets.get(record.name),
                            lambda r=record, u=upcoming: ahead.start(
                                tg, r, u, None if u is None else subsets.get(u.name)))
                    except Exception as exc:  # noqa: BLE001 - the other topics are applied
                        # all the same (as when each topic was its own watch callback);
                        # raised once they are
                        log.error("applying the partition states of topic %s failed: %r",
                                  record.name, exc)
                        self._apply_failed.add(record.name)
                        failed = failed or exc
                        continue
                    finally:
                        self._end_takeovers(taking, record.name)
                    if record.name not in subsets:
                        self._apply_failed.discard(record.name)
                    if applied is not None:
                        applied(record)
            if failed is not None:
                raise failed
        finally:
            self._end_takeovers(taking)

    def _subsets(self, records: list[TopicRecord],
                 only: Mapping[str, Collection[int]] | None) -> dict[str, list[int]]:
        """The partitions to apply of each topic that is not applied whole: those of
        `only` the record has, unless the topic's last apply failed."""
        if only is None:
            return {}
        subsets: dict[str, list[int]] = {}
        for record in records:
            indices = only.get(record.name)
            if indices is not None and record.name not in self._apply_failed:
                size = len(record.partitions)
                subsets[record.name] = sorted(i for i in indices if 0 <= i < size)
        return subsets

    @staticmethod
    def _states(record: TopicRecord, subset: list[int] | None
                ) -> Iterable[tuple[int, PartitionState]]:
        """(index, state) of the record's partitions to apply: all, or `subset`."""
        if subset is None:
            return enumerate(record.partitions)
        return ((i, record.partitions[i]) for i in subset)

    def _start_takeovers(self, records: list[TopicRecord],
                         subsets: Mapping[str, list[int]] | None = None
                         ) -> dict[str, dict[tuple[str, int], anyio.Event]]:
        """Note the partitions these records give this broker to lead that it does not
        lead now (until_taken_over waits for them), by topic."""
        me = self.broker_id
        started: dict[str, dict[tuple[str, int], anyio.Event]] = {}
        for record in records:
            for index, state in self._states(record, (subsets or {}).get(record.name)):
                if state.leader != me or me not in state.replicas:
                    continue
                key = (record.name, index)
                partition = self.partitions.get(key)
                if partition is not None and (partition.is_leader
                                              or state.leader_epoch < partition.leader_epoch):
                    continue
                started.setdefault(record.name, {})[key] = self._takeovers[key] = \
                    anyio.Event()
        return started

    def _end_takeovers(self, started: dict[str, dict[tuple[str, int], anyio.Event]],
                       topic: str | None = None) -> None:
        """The takeovers `started` (of `topic`, or all) are applied: their waiters go on
        (a later apply's takeover of the same partition stays)."""
        topics = [topic] if topic is not None else list(started)
        for name in topics:
            for key, event in started.pop(name, {}).items():
                event.set()
                if self._takeovers.get(key) is event:
                    del self._takeovers[key]

    @property
    def taking_over(self) -> bool:
        """Whether this broker is taking the lead of a partition now."""
        return bool(self._takeovers)

    async def until_taken_over(self, keys: Iterable[tuple[str, int]], timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until this broker has applied the states that make it
        leader of these partitions, for those it is taking the lead of now.

        Why produce requests wait here: the other brokers' metadata names this broker as
        the leader as soon as the store has the state, while this broker still records
        its leader epoch (a checkpoint write and fsync) before it serves. Refused
        meanwhile, a producer's pipelined retries got NOT_LEADER_OR_FOLLOWER for their
        first batches and then, once it led, OUT_OF_ORDER_SEQUENCE_NUMBER for a later one
        whose predecessor this broker lacks; librdkafka answers that by bumping its epoch
        and renumbering the batches refused, so one this broker already held by
        replication is written twice (librdkafka issue 4953). Waiting, they are taken in
        their order: a batch held by replication is answered with its offsets, the next
        appended. Requests that arrive before this broker has the state are still
        refused (as Kafka's are before its LeaderAndIsr)."""
        if not self._takeovers:
            return
        events = [e for key in keys if (e := self._takeovers.get(key)) is not None]
        if not events:
            return
        with anyio.move_on_after(timeout_s):
            for event in events:
                await event.wait()

    async def _apply_one(self, record: TopicRecord, versions: list[int] | None,
                         subset: list[int] | None = None,
                         prepared: Callable[[], None] | None = None) -> None:
        """Apply one topic's states; `prepared()` once its logs are open (the next
        topic's are then opened while this one is applied: _OpensAhead)."""
        opened = await self._prepare(record, subset)
        if prepared is not None:
            prepared()
        started = time.monotonic()
        steps = self._apply_steps(record, versions, subset)
        reply: Partition | UnreadablePartitionMetadata | None = None
        while True:
            try:
                need = steps.send(reply)
            except StopIteration:
                return
            reply = None
            if isinstance(need, _LeadAt):
                await anyio.to_thread.run_sync(need.run)
                started = time.monotonic()
            elif need is not None:
                got = opened.pop(need, None)
                if got is None:  # not prepared: opened on its own
                    state = record.partitions[need]
                    lead_epoch = state.leader_epoch if state.leader == self.broker_id else None
                    try:
                        got = await self.logs.open_partition_async(record, need, lead_epoch)
                    except UnreadablePartitionMetadata as exc:
                        got = exc
                if isinstance(got, Exception) and not isinstance(got,
                                                                 UnreadablePartitionMetadata):
                    raise got
                reply = got
                started = time.monotonic()
            elif time.monotonic() - started > APPLY_SLICE_S:
                await anyio.sleep(0)
                started = time.monotonic()

    async def _prepare(self, record: TopicRecord, subset: list[int] | None = None
                       ) -> dict[int, Partition | Exception]:
        """apply_topic_async's worker-thread work, in two calls whatever the topic's size:
        record the epoch of partitions to be led here that are not led here now, and
        open the logs of partitions new here (with the epoch of those to be led here).
        Returns what each open gave.

        A partition followed until now stops being fetched first, on the loop (Kafka's
        ReplicaManager.makeLeaders removes the fetchers before Partition.makeLeader),
        so nothing appends to its log while its epoch is recorded at the log end; it is
        not led here yet, so produce requests are refused meanwhile, as before any
        leader change. A partition led here already that gets a new epoch (rare: no
        election in election.py keeps the leader and bumps the epoch, but a
        reassignment can) takes it in make_leader on the loop: its producers append
        until then."""
        leading = self._stop_fetching_takeovers(
            [record], None if subset is None else {record.name: subset})
        if leading:
            await anyio.to_thread.run_sync(_record_epochs, leading)
        wanted = self.new_here(record, subset)
        return await self.logs.open_partitions_async(record, wanted) if wanted else {}

    def new_here(self, record: TopicRecord, subset: list[int] | None = None
                 ) -> dict[int, int | None]:
        """The record's partitions (all, or `subset`) hosted here whose logs are not open
        yet (index -> the leader epoch when this broker is to lead it, else None)."""
        me = self.broker_id
        return {index: state.leader_epoch if state.leader == me else None
                for index, state in self._states(record, subset)
                if me in state.replicas and (record.name, index) not in self.partitions}

    def _stop_fetching_takeovers(self, records: list[TopicRecord],
                                 subsets: Mapping[str, list[int]] | None = None
                                 ) -> list[_LeadAt]:
        """The partitions hosted here that these records give this broker to lead and
        that it does not lead yet at that epoch: each stops being fetched now (so
        nothing appends to its log while its epoch is recorded) and gets a _LeadAt."""
        me = self.broker_id
        leading: list[_LeadAt] = []
        for record in records:
            for index, state in self._states(record, (subsets or {}).get(record.name)):
                if state.leader != me or me not in state.replicas:
                    continue
                partition = self.partitions.get((record.name, index))
                if (partition is None or partition.log.offline or partition.is_leader
                        or state.leader_epoch < partition.leader_epoch
                        or partition.log.log.latest_epoch == state.leader_epoch):
                    continue
                self.fetchers.unfollow((record.name, index))
                leading.append(_LeadAt(partition, state.leader_epoch))
        return leading

    def _apply_steps(self, record: TopicRecord, versions: list[int] | None,
                     subset: list[int] | None = None
                     ) -> Generator[_Step, Partition | UnreadablePartitionMetadata | None,
                                    None]:
        """apply_topic's work, one partition a step (of `subset`'s, when given). A
        partition whose log is not open yields its index and gets the opened log (or why
        it cannot be) sent back; one without a leader that this broker is to lead yields
        a _LeadAt first."""
        for index, state in self._states(record, subset):
            yield None
            version = versions[index] if versions is not None else -1
            key = (record.name, index)
            partition = self.partitions.get(key)
            if self.broker_id not in state.replicas:
                if partition is not None:
                    # reassigned away (Kafka's StopReplica with delete): the data goes too
                    self._drop(key)
                    self.logs.delete_partition(record.name, index)
                elif key not in self._stray_checked:
                    # moved away while this broker was down: its data is stray (looked
                    # for once per partition, not on every metadata change)
                    self._stray_checked.add(key)
                    if self.logs.delete_stray(record.name, index):
                        log.info("deleted the stray log of %s-%d (not assigned here)",
                                 record.name, index)
                continue
            if partition is None:
                opened = yield index
                if not isinstance(opened, Partition):
                    # whose log it is cannot be told: not served (clients are told this
                    # broker does not host it), not adopted as this topic's, not deleted
                    log.error("%s-%d is not served by this broker: %s. Fix the cause and "
                              "restart the broker (other replicas, if any, serve it meanwhile)",
                              record.name, index, opened)
                    continue
                partition = ReplicaPartition(opened, self.broker_id, self.purgatory,
                                             self._isr_candidate)
                self.partitions[key] = partition
            else:
                self.logs.ensure_topic_id(record, index)
                if state.leader_epoch < partition.leader_epoch:
                    log.info("ignoring stale state of %s-%d at leader epoch %d (have %d)",
                             record.name, index, state.leader_epoch, partition.leader_epoch)
                    continue
                if partition.log.offline:
                    # its dir failed: neither led nor followed here until a restart (the
                    # controller moves it away once told, take_offline)
                    continue
            was_leader = partition.is_leader
            if state.leader == self.broker_id:
                self.fetchers.unfollow(key)
                if (partition.leader < 0
                        and partition.log.log.latest_epoch != state.leader_epoch):
                    yield _LeadAt(partition, state.leader_epoch)
                if partition.make_leader(state, version):
                    self._leadership(record.name, index, True)
                continue
            if self.shutting_down and self.broker_id not in state.isr:
                partition.make_follower(state, version)
                self.fetchers.unfollow(key)
            elif partition.make_follower(state, version):
                if state.leader >= 0:
                    self.fetchers.follow(partition)
                else:
                    self.fetchers.unfollow(key)
            if was_leader:
                self._leadership(record.name, index, False)

    def as_served(self, record: TopicRecord) -> TopicRecord:
        """The record with no leader for the partitions it gives this broker to lead
        that it does not lead yet at that epoch (the record itself when there are none)."""
        me = self.broker_id
        pending = [i for i, state in enumerate(record.partitions) if state.leader == me
                   and not _leads(self.partitions.get((record.name, i)), state.leader_epoch)]
        if not pending:
            return record
        partitions = list(record.partitions)
        for i in pending:
            partitions[i] = dataclasses.replace(partitions[i], leader=-1)
        return dataclasses.replace(record, partitions=partitions)

    def _leader_throttles(self, partition: ReplicaPartition, follower: int) -> bool:
        """The topic throttles this (leader) replica's traffic to an out-of-sync follower."""
        return follower not in partition.isr and throttled(
            partition.config["leader.replication.throttled.replicas"], partition.index,
            self.broker_id)

    def leader_throttled(self, partition: ReplicaPartition, follower: int) -> bool:
        """Hold back a follower's fetch of the partition: it is throttled and the
        leader-side rate is above leader.replication.throttled.rate."""
        return self._leader_throttles(partition, follower) and self.leader_quota.exceeded()

    def record_leader_replication(self, partition: ReplicaPartition, follower: int,
                                  nbytes: int) -> None:
        if nbytes and self._leader_throttles(partition, follower):
            self.leader_quota.record(nbytes)

    def _leadership(self, topic: str, index: int, leads: bool) -> None:
        taken, given = self.leadership_changes
        self.leadership_changes = (taken + 1, given) if leads else (taken, given + 1)
        for listener in self.leadership_listeners:
            listener(topic, index, leads)

    def take_offline(self) -> list[tuple[str, int]]:
        """Stop leading and following the partitions whose log dir failed (Kafka's
        handleLogDirFailure): their fetchers stop at once, so a follower's failed copy
        never counts towards an ISR again, and a leader's waiters re-check and fail. They
        stay hosted, answering KAFKA_STORAGE_ERROR. Returns every partition on a failed
        dir (the controller is to be told of them all)."""
        offline: list[tuple[str, int]] = []
        for key, partition in self.partitions.items():
            if not partition.log.offline:
                continue
            offline.append(key)
            if key in self._stopped_offline:
                continue
            self._stopped_offline.add(key)
            self.fetchers.unfollow(key)
            if partition.is_leader:
                self._leadership(key[0], key[1], False)
            partition.detach()
        return offline

    def fence(self) -> None:
        """Lead nothing until told again (the coordination session was lost: another
        broker may lead our partitions by now). Waiting requests re-check and fail."""
        for (topic, index), partition in self.partitions.items():
            if partition.is_leader:
                self._leadership(topic, index, False)
            self.fetchers.unfollow((topic, index))
            partition.detach()
        log.warning("coordination session lost: leading and following nothing until the "
                    "store is back (nothing to do if ZooKeeper is reachable again soon)")

    def remove_topic(self, name: str) -> None:
        """The topic is gone: detach its partitions and delete their logs."""
        for key in [k for k in self.partitions if k[0] == name]:
            self._drop(key)
        self.logs.delete_topic(name)

    def _drop(self, key: tuple[str, int]) -> None:
        self.fetchers.unfollow(key)
        partition = self.partitions.pop(key)
        if partition.is_leader:
            self._leadership(key[0], key[1], False)
        partition.detach()

    def _isr_candidate(self, partition: ReplicaPartition) -> None:
        self.on_isr_candidate(partition)

    def update_topic_config(self, record: TopicRecord) -> None:
        self.logs.update_topic_config(record)


def _leads(partition: ReplicaPartition | None, leader_epoch: int) -> bool:
    return (partition is not None and partition.is_leader
            and partition.leader_epoch == leader_epoch)


def _ignore(_partition: ReplicaPartition) -> None:
    pass


def _unknown(topic: str, index: int) -> bool:
    return False


class _OpensAhead:
    """Opens the next topic's new logs while the loop applies the current one's states.

    A restart applies every topic in one batch, one topic after another: each topic's
    logs were opened on worker threads while the loop waited, then the loop applied its
    states while the threads waited (10,000 logs as 100 topics: the threads were busy
    about half of the 13 s). Only the opens go ahead (each log is registered with the
    log manager, not the replica layer): the topic's own _prepare then finds them open,
    and stops fetching and records epochs as before, in order. A failed open ahead is
    met again by _prepare, which reports it where it did. A topic's _prepare waits for
    its opens ahead (the same log is never opened twice)."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas
        self._running: dict[str, anyio.Event] = {}

    def start(self, tg: anyio.abc.TaskGroup, current: TopicRecord,
              upcoming: TopicRecord | None, subset: list[int] | None) -> None:
        if upcoming is None or upcoming.name == current.name or upcoming.name in self._running:
            return
        wanted = self.replicas.new_here(upcoming, subset)
        if not wanted:
            return
        self._running[upcoming.name] = done = anyio.Event()
        tg.start_soon(self._open, upcoming, wanted, done)

    async def _open(self, record: TopicRecord, wanted: dict[int, int | None],
                    done: anyio.Event) -> None:
        try:
            await self.replicas.logs.open_partitions_async(record, wanted)
        except Exception as exc:  # noqa: BLE001 - _prepare opens them again and reports it
            log.debug("opening the logs of topic %s ahead: %r", record.name, exc)
        finally:
            done.set()

    async def done(self, topic: str) -> None:
        running = self._running.pop(topic, None)
        if running is not None:
            await running.wait()
