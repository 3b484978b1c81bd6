"""Followers copy their leaders: one fetcher task per leader broker fetches
every partition this broker follows from it (Kafka's ReplicaFetcherThread).

A partition joins a fetcher when this broker becomes its follower at a new
leader epoch. It first truncates by leader epoch: it asks the leader
(OffsetForLeaderEpoch) where its own latest epoch ended on the leader and cuts
its log there, so records a failed leader wrote but never committed are
dropped rather than merely hidden below the high watermark. Then it fetches
from its log end, appending the leader's batches unchanged (same offsets,
epochs and bytes), and takes the leader's high watermark as far as it has the
records. Fetches run in an incremental fetch session (KIP-227, fetch/handler.py): after
the first, a fetch names only the partitions whose position moved.

Per round trip, the request is encoded and the answer read, walked and each partition's
records appended to its log from the receive buffer, uncopied, in Rust
(_core.FetchChannel, through BrokerConnection.request_fetch; the appends in one call
without the GIL). Python then handles per partition
what changes state: the high watermark, the log start, errors and truncation.

A partition the leader answers with an error is left out of this fetcher's requests
for replica.fetch.backoff.ms while the others go on being fetched (Kafka's
delayPartitions): left out, it is forgotten in the leader's fetch session, which would
otherwise answer its error at once in every fetch, and named again once its delay is
over."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import anyio

from pybroker import _core
from pybroker.client.connection import BrokerConnection, BrokerUnreachable
from pybroker.client.peer import connect_peer
from pybroker.config import BrokerConfig
from pybroker.errors import ErrorCode
from pybroker.fetch.handler import FetchSessionHandler
from pybroker.log import retention
from pybroker.metadata.cache import MetadataCache
from pybroker.replica.partition import ReplicaPartition
from pybroker.replica.throttle import ReplicationQuota, throttled
from pybroker.server.loop_slice import LoopSlice

log = logging.getLogger(__name__)

LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23
LIST_OFFSETS_VERSION = 5
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
EARLIEST = -2
LATEST = -1

#: a leader that does not know yet of the epoch the follower fetches at (both learn of a
#: new leader from the store's watches, in no set order) is asked again this soon,
#: rather than after replica.fetch.backoff.ms: acks=all waits for this follower
LEADER_CATCHING_UP_S = 0.05
#: ... for this long after the partition joined the fetcher and until it is first
#: fetched; after that the error means our metadata is behind (the leader moved): Kafka's
#: replica.fetch.backoff.ms
LEADER_CATCHING_UP_FOR_S = 5.0
LEADER_CATCHING_UP = frozenset({ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER})

#: the codes a fetch answer is compared with per partition, as plain ints
NO_ERROR = int(ErrorCode.NONE)
OUT_OF_RANGE = int(ErrorCode.OFFSET_OUT_OF_RANGE)

#: errors that mean "this leader is not (yet) the one to ask": wait for metadata
RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
})


@dataclasses.dataclass
class FetchState:
    partition: ReplicaPartition
    #: the leader epoch this state follows; a newer one replaces the state
    leader_epoch: int
    #: where the next fetch starts (the log end, once truncated)
    fetch_offset: int = 0
    truncated: bool = False
    #: answered without error at this epoch at least once
    fetched: bool = False
    #: time.monotonic() when it joined the fetcher
    added_at: float = dataclasses.field(default_factory=time.monotonic)
    #: time.monotonic() before which it is not asked for (after an error)
    delayed_until: float = 0.0
    #: its fields in the last fetch built, reused while its position has not moved (never
    #: changed in place: the fetch session keeps the ones it sent to compare with)
    fields: dict[str, int] | None = dataclasses.field(default=None, repr=False, compare=False)


class ReplicaFetcher:
    """Fetches every partition followed from one leader."""

    def __init__(self, leader_id: int, broker_id: int, metadata: MetadataCache,
                 config: BrokerConfig, quota: ReplicationQuota | None = None,
                 fetcher_id: int = 0) -> None:
        self.leader_id = leader_id
        #: which of this leader's fetchers (num.replica.fetchers) this is
        self.fetcher_id = fetcher_id
        #: follower.replication.throttled.rate, shared by this broker's fetchers
        self.quota = quota
        self.broker_id = broker_id
        self.metadata = metadata
        self.config = config
        self.states: dict[tuple[str, int], FetchState] = {}
        self._changed = anyio.Event()
        self._connection: BrokerConnection | None = None
        self.session = FetchSessionHandler()
        self.backoff_s = config["replica.fetch.backoff.ms"] / 1000
        #: the keys of the states not truncated yet (every state with truncated False is
        #: here): a fetch round with none skips the pass over every state (issue 26)
        self._untruncated: set[tuple[str, int]] = set()
        # the next request, kept from round to round and changed only where a partition
        # moved (issue 25: a pass over every followed partition per round trip was O(all)
        # at thousands of partitions): the states asked for, their fields, their logs
        self._asked: dict[tuple[str, int], FetchState] = {}
        self._wanted: dict[tuple[str, int], dict[str, int]] = {}
        self._logs: dict[tuple[str, int], _core.PartitionLog] = {}
        #: keys whose part in the next request may have changed (see _plan)
        self._dirty: set[tuple[str, int]] = set()
        #: keys left out after an error, until when (time.monotonic())
        self._delayed: dict[tuple[str, int], float] = {}
        #: keys of the request in flight added or removed since it was built
        self._replaced: set[tuple[str, int]] = set()
        #: the last plan was made over every state (a throttle was on)
        self._planned_all = True
        self._starts_moved = retention.starts_moved
        # replica.fetch.* are read-only in Kafka (not in DYNAMIC_BROKER_KEYS): read once,
        # not per round trip
        self._partition_max_bytes = config["replica.fetch.max.bytes"]
        wait_ms = config["replica.fetch.wait.max.ms"]
        self._wait_s = wait_ms / 1000
        self._request_fields = {
            "replica_id": broker_id, "max_wait_ms": wait_ms,
            "min_bytes": config["replica.fetch.min.bytes"],
            "max_bytes": config["replica.fetch.response.max.bytes"],
            "isolation_level": 0, "rack_id": ""}

    def add(self, partition: ReplicaPartition) -> None:
        key = (partition.topic, partition.index)
        self.states[key] = FetchState(partition, partition.leader_epoch)
        self._untruncated.add(key)
        self._moved(key)
        self._changed.set()

    def remove(self, key: tuple[str, int]) -> None:
        self.states.pop(key, None)
        self._untruncated.discard(key)
        self._moved(key)

    def _moved(self, key: tuple[str, int]) -> None:
        """The partition's part in the next request may have changed."""
        self._dirty.add(key)
        if key in self._asked:
            self._replaced.add(key)

    async def run(self) -> None:
        while True:
            if not self.states:
                self._changed = anyio.Event()
                await self._changed.wait()
                continue
            connection = self._connect()
            if connection is None:
                await anyio.sleep(self.backoff_s)
                continue
            try:
                await self._truncate_new(connection)
                progressed = await self._fetch_once(connection)
            except BrokerUnreachable as exc:
                log.info("fetching from broker %d failed: %s", self.leader_id, exc)
                self.session.reset()
                await anyio.sleep(self.backoff_s)
                continue
            if not progressed:
                await anyio.sleep(self._idle_s())

    def _idle_s(self) -> float:
        """How long to wait when nothing could be fetched: until the first delayed
        partition may be asked again, at most replica.fetch.backoff.ms."""
        now = time.monotonic()
        delays = [until - now for until in self._delayed.values() if until > now]
        return max(0.0, min([self.backoff_s, *delays]))

    def _ready(self, state: FetchState, now: float) -> bool:
        return state.delayed_until <= now

    def _delay(self, state: FetchState, code: ErrorCode) -> None:
        """Leave the partition out of requests for replica.fetch.backoff.ms after an
        error (Kafka's delayPartitions); shorter while a new leader may still be
        catching up with the epoch we follow."""
        now = time.monotonic()
        catching_up = (code in LEADER_CATCHING_UP and not state.fetched
                       and now - state.added_at < LEADER_CATCHING_UP_FOR_S)
        state.delayed_until = now + (min(self.backoff_s, LEADER_CATCHING_UP_S)
                                     if catching_up else self.backoff_s)
        key = (state.partition.topic, state.partition.index)
        if self.states.get(key) is state:
            self._delayed[key] = state.delayed_until
            self._moved(key)

    def _connect(self) -> BrokerConnection | None:
        endpoint = self.metadata.broker(self.leader_id)
        if endpoint is None:
            return None
        current = self._connection
        if current is None or (current.host, current.port) != (endpoint.host, endpoint.port):
            self._connection = connect_peer(
                self.config, endpoint, f"broker-{self.broker_id}-fetcher-{self.fetcher_id}",
                self.config["replica.socket.timeout.ms"] / 1000)
            self.session.reset()
        return self._connection

    # --- truncation by leader epoch ---------------------------------------------------
    async def _truncate_new(self, connection: BrokerConnection) -> None:
        if not self._untruncated:
            return  # every state truncated: the round trip's usual case
        now = time.monotonic()
        pending = [s for s in self.states.values() if not s.truncated and self._ready(s, now)]
        if not pending:
            return
        topics: dict[str, list[dict[str, Any]]] = {}
        asked: dict[tuple[str, int], FetchState] = {}
        for state in pending:
            p = state.partition
            latest = p.log.log.latest_epoch
            if latest is None:
                # nothing to compare: keep what is committed, as Kafka does
                p.truncate_to(p.high_watermark)
                self._truncated(state)
                continue
            topics.setdefault(p.topic, []).append({
                "partition": p.index, "current_leader_epoch": state.leader_epoch,
                "leader_epoch": latest})
            asked[(p.topic, p.index)] = state
        if not asked:
            return
        response = await connection.request(OFFSET_FOR_LEADER_EPOCH,
                                            OFFSET_FOR_LEADER_EPOCH_VERSION, {
            "replica_id": self.broker_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]})
        for topic in response["topics"]:
            for answer in topic["partitions"]:
                state = asked.get((topic["topic"], answer["partition"]))
                if state is None or self.states.get((topic["topic"], answer["partition"])) \
                        is not state:
                    continue
                code = ErrorCode(answer["error_code"])
                if code != ErrorCode.NONE:
                    self._delay(state, code)
                    log.info("OffsetForLeaderEpoch for %s-%d from broker %d: %s",
                             topic["topic"], answer["partition"], self.leader_id, code.name)
                    continue
                self._truncate_to_epoch_end(state, answer["leader_epoch"], answer["end_offset"])

    def _truncate_to_epoch_end(self, state: FetchState, epoch: int, end_offset: int) -> None:
        """Cut the log where the leader says our latest epoch ended (KIP-279). When
        the leader answers with an older epoch than ours, we cut to where that
        epoch ends in our own log too, and ask again with our (now older) latest
        epoch, until both agree: records of epochs the leader never had go."""
        p = state.partition
        if epoch < 0 or end_offset < 0:
            # the leader knows no such epoch: keep what is committed, as Kafka does
            p.truncate_to(p.high_watermark)
            self._truncated(state)
            return
        target = min(end_offset, p.log_end_offset)
        mine_epoch, mine_end = p.log.log.end_offset_for_epoch(epoch)
        if mine_end >= 0:
            target = min(target, mine_end)
        if target < p.log_end_offset:
            log.info("truncating %s-%d from %d to %d (leader epoch %d ends at %d on broker %d)",
                     p.topic, p.index, p.log_end_offset, target, epoch, end_offset,
                     self.leader_id)
        agreed = mine_epoch == epoch and p.log.log.latest_epoch == epoch
        p.truncate_to(target)
        if agreed or p.log.log.latest_epoch is None:
            self._truncated(state)
        # else: our latest epoch is now older; the next round asks about it

    def _truncated(self, state: FetchState) -> None:
        state.truncated = True
        key = (state.partition.topic, state.partition.index)
        if self.states.get(key) is state:  # not a replaced one's key: the new one is not
            self._untruncated.discard(key)
            self._moved(key)
        state.fetch_offset = state.partition.log_end_offset

    # --- fetching ----------------------------------------------------------------------
    async def _plan(self) -> set[tuple[str, int]] | None:
        """Bring the next request (`_asked`, `_wanted`, `_logs`) up to date: the keys that
        moved since the last plan, or every state while a throttle is on or after
        retention moved log starts here (rare; None then: the session compares every
        key). A state is asked for once truncated, while its log dir is online, not
        delayed after an error, and not throttled."""
        now = time.monotonic()
        for key, until in list(self._delayed.items()):
            if until <= now:
                del self._delayed[key]
                self._dirty.add(key)
        throttling = self.quota is not None and self.quota.exceeded()
        every = throttling or self._planned_all or self._starts_moved != retention.starts_moved
        self._planned_all = throttling
        self._starts_moved = retention.starts_moved
        keys: list[tuple[str, int]]
        changed: set[tuple[str, int]] | None
        if every:  # in the order followed, as the request names them
            keys = list(self.states) + [k for k in self._asked if k not in self.states]
            changed = None
        else:
            changed = self._dirty
            keys = sorted(changed)
        self._dirty = set()
        # a pass over every partition followed from this leader (thousands, when every
        # key is planned): the loop's other tasks get a turn every few ms (issue 25); a
        # state removed or replaced during a pause is marked again for the next plan
        pace = LoopSlice()
        max_bytes = self._partition_max_bytes
        for key in keys:
            await pace.pause_if_due()
            state = self.states.get(key)
            if (state is None or not state.truncated or state.partition.log.offline
                    or not self._ready(state, now) or (throttling and self._throttled(state))):
                if self._asked.pop(key, None) is not None:
                    del self._wanted[key]
                    del self._logs[key]
                continue
            self._asked[key] = state
            self._logs[key] = state.partition.log.log
            start = state.partition.log_start_offset
            fields = state.fields
            if (fields is None or fields["fetch_offset"] != state.fetch_offset
                    or fields["log_start_offset"] != start):
                # a dict per partition per round trip only where the position moved
                fields = state.fields = {
                    "partition": key[1], "current_leader_epoch": state.leader_epoch,
                    "fetch_offset": state.fetch_offset, "log_start_offset": start,
                    "partition_max_bytes": max_bytes}
            self._wanted[key] = fields
        return changed

    async def _fetch_once(self, connection: BrokerConnection) -> bool:
        """One Fetch for every truncated partition; False when nothing could be
        fetched (all errored), so the caller backs off. The request is the last one
        changed where partitions moved (_plan), and the fetch session names only those."""
        # a partition on a failed log dir is not written to again (take_offline drops it)
        # nor is one delayed after an error: left out, the leader's session forgets it
        self._replaced = set()
        changed = await self._plan()
        ready = self._asked
        if not ready:
            return False

        def logs() -> dict[tuple[str, int], _core.PartitionLog]:
            # only partitions still followed as asked once the answer is in: a state
            # removed or replaced while the fetch was out gets nothing appended
            if not self._replaced:
                return self._logs
            return {key: log for key, log in self._logs.items() if key not in self._replaced}
        # the request encoded, the answer read and every partition's records appended
        # in Rust (_core.FetchChannel; the appends in one call without the GIL): Python
        # only waits for the socket between reads (issue 26). A malformed answer closes
        # the connection (BrokerUnreachable)
        response = await connection.request_fetch(
            self._request_fields | self.session.build(self._wanted, changed), logs,
            timeout_s=self._wait_s + connection.timeout_s)
        if not self.session.handle_response({"error_code": response.error_code,
                                             "session_id": response.session_id}):
            return True  # a session error: the next fetch is a full one, at once
        # an incremental answer leaves out unchanged partitions: no answer is no error
        progressed = False
        failed = False
        for answer in response.partitions:
            key = (answer.topic, answer.partition)
            state = self.states.get(key)
            if state is None or state is not ready.get(key) or key in self._replaced:
                continue  # removed or replaced while the fetch was out
            self._dirty.add(key)  # its position, log start or delay may move below
            try:
                if answer.error_code == OUT_OF_RANGE:
                    await self._reset_out_of_range(connection, state)
                    applied = True
                else:
                    applied = self._apply(state, answer)
            except _core.StorageError as exc:
                self._mark_failed(key, exc)
                continue
            if applied:
                progressed = True
            else:
                failed = True
                # named again (its fields re-sent) once asked for again, so the leader
                # answers it again; until then the session forgets it
                self.session.resend(key)
            if self.quota is not None and answer.records_bytes and self._throttled(state):
                self.quota.record(answer.records_bytes)
        return progressed or not failed

    def _mark_failed(self, key: tuple[str, int], exc: Exception) -> None:
        """The partition's log could not take what was fetched (Kafka's
        markPartitionFailed): it is no longer fetched, so it leaves the ISR by the
        leader's rule, until its next leader change. A failed fsync has taken its log
        dir offline too (the controller then moves it away)."""
        # no longer wanted: the next fetch forgets it in the leader's session
        self.remove(key)
        log.error("%s-%d: appending what broker %d sent failed (%s); no longer fetched "
                  "until its next leader change. Check the disk of its log dir (dmesg), "
                  "then restart this broker", key[0], key[1], self.leader_id, exc)

    def _throttled(self, state: FetchState) -> bool:
        """An out-of-sync replica the topic names in follower.replication.throttled.replicas."""
        p = state.partition
        return self.broker_id not in p.isr and throttled(
            p.config["follower.replication.throttled.replicas"], p.index, self.broker_id)

    def _apply(self, state: FetchState, answer: _core.FetchedPartition) -> bool:
        """What follows one partition's answer, its records already appended (or
        refused) by apply_fetch_response; not for OFFSET_OUT_OF_RANGE, which asks the
        leader (_reset_out_of_range). A plain call: a coroutine per partition per round
        trip for what never waits was a cost of its own (issue 26)."""
        p = state.partition
        if answer.error_code == NO_ERROR:
            if answer.error is not None:
                if isinstance(answer.error, _core.UnexpectedAppendOffsetError):
                    log.warning("%s-%d: %s; truncating by leader epoch again", p.topic,
                                p.index, answer.error)
                    state.truncated = False
                    self._untruncated.add((p.topic, p.index))
                    return True
                raise answer.error  # as the append itself would have raised it
            if answer.appended:
                p.appended_as_follower(answer.high_watermark)
                state.fetch_offset = answer.log_end_offset
            else:
                p.update_follower_high_watermark(answer.high_watermark)
            p.follow_log_start_offset(answer.log_start_offset)
            state.fetched = True
            return True
        code = ErrorCode(answer.error_code)
        if code != ErrorCode.FENCED_LEADER_EPOCH:
            # Kafka delays every partition with an error but a fenced one, which waits for
            # its new leader epoch (asked again at once here, as before)
            self._delay(state, code)
        if code not in RETRIABLE:
            log.warning("fetching %s-%d from broker %d: %s; fetched again (nothing to do "
                        "unless it repeats: then check that broker's log)", p.topic, p.index,
                        self.leader_id, code.name)
        return False

    async def _reset_out_of_range(self, connection: BrokerConnection, state: FetchState) -> None:
        """Our fetch offset is outside the leader's log: past its end (an unclean
        leader with less than we have) we truncate to its end; below its start
        (retention removed what we lack) we start over at its start (Kafka's
        handleOutOfRangeError)."""
        p = state.partition
        start = await self._leader_offset(connection, p, EARLIEST)
        end = await self._leader_offset(connection, p, LATEST)
        if start is None or end is None or self.states.get((p.topic, p.index)) is not state:
            return  # no answer, or no longer followed as asked (led here by now, say)
        if state.fetch_offset > end:
            log.warning("%s-%d: leader %d ends at %d below our %d; truncating to it (records "
                        "past a leader's end were never committed: nothing to do)", p.topic,
                        p.index, self.leader_id, end, state.fetch_offset)
            p.truncate_to(end)
            state.fetch_offset = p.log_end_offset
        elif state.fetch_offset < start:
            log.warning("%s-%d: leader %d starts at %d above our %d (retention or "
                        "DeleteRecords moved its start); starting over there, nothing to do",
                        p.topic, p.index, self.leader_id, start, state.fetch_offset)
            p.truncate_fully_and_start_at(start)
            state.fetch_offset = start

    async def _leader_offset(self, connection: BrokerConnection, p: ReplicaPartition,
                             timestamp: int) -> int | None:
        response = await connection.request(LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": self.broker_id, "isolation_level": 0,
            "topics": [{"name": p.topic, "partitions": [{
                "partition_index": p.index, "current_leader_epoch": p.leader_epoch,
                "timestamp": timestamp}]}]})
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"] != 0:
            return None
        return int(answer["offset"])


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (a signed 32-bit int) of `text`."""
    data = text.encode("utf-16-be")  # Java strings are UTF-16 code units
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def fetcher_id(topic: str, index: int, fetchers: int) -> int:
    """Which of a leader's `fetchers` (num.replica.fetchers) fetches the partition: Kafka's
    AbstractFetcherManager.getFetcherId, abs(31 * topic.hashCode + partition) mod n, in
    Java's 32-bit arithmetic."""
    n = (31 * java_string_hash(topic) + index) & 0xFFFFFFFF
    n = n - (1 << 32) if n & 0x80000000 else n
    return (0 if n == -(1 << 31) else abs(n)) % fetchers


#: a fetcher's key: (leader broker id, fetcher id)
FetcherKey = tuple[int, int]


class ReplicaFetcherManager:
    """Which fetcher follows which partition; fetchers run in the broker's task group.

    Each leader gets `num.replica.fetchers` fetchers (Kafka's fetcher threads per source
    broker), each with its connection, fetch session and one fetch in flight; a
    partition's fetcher is fixed by its name (fetcher_id). A change of the setting moves
    every followed partition to its fetcher under the new count (`resize`); a moved
    partition truncates by leader epoch again before it fetches, as after a leader
    change."""

    def __init__(self, broker_id: int, metadata: MetadataCache, config: BrokerConfig) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.config = config
        self.fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._started: set[FetcherKey] = set()
        self._new_fetcher = anyio.Event()
        self.quota = ReplicationQuota(lambda: config["follower.replication.throttled.rate"])
        self._count = config["num.replica.fetchers"]

    def follow(self, partition: ReplicaPartition) -> None:
        """Fetch `partition` from its (new) leader, truncating first."""
        self.unfollow((partition.topic, partition.index))
        key = (partition.leader, fetcher_id(partition.topic, partition.index, self._count))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = ReplicaFetcher(partition.leader, self.broker_id, self.metadata, self.config,
                                     self.quota, key[1])
            self.fetchers[key] = fetcher
            self._new_fetcher.set()
        fetcher.add(partition)

    def resize(self) -> None:
        """num.replica.fetchers changed (a dynamic broker config): every followed partition
        goes to its fetcher under the new count (Kafka's resizeThreadPool)."""
        count = self.config["num.replica.fetchers"]
        if count == self._count:
            return
        log.info("num.replica.fetchers %d -> %d: moving the followed partitions to their "
                 "fetchers", self._count, count)
        self._count = count
        followed = [state.partition for fetcher in self.fetchers.values()
                    for state in list(fetcher.states.values())]
        for partition in followed:
            self.follow(partition)

    def unfollow(self, key: tuple[str, int]) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(key)

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                for leader, fetcher in self.fetchers.items():
                    if leader not in self._started:
                        self._started.add(leader)
                        tg.start_soon(fetcher.run)
                self._new_fetcher = anyio.Event()
                await self._new_fetcher.wait()
