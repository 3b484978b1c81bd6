"""Fetch (1): record bytes from many partitions, long-polled.

A fetch answers at once when it has `min_bytes`, else waits in the purgatory
(woken when a high watermark moves) until it has them or `max_wait_ms` passes.
Consumers read up to the high watermark (with isolation_level=1, read_committed, up
to the last stable offset, with the aborted transactions of the range), from the
leader or (Fetch v11+, KIP-392) from a follower; with `replica.selector.class` the
leader sends a consumer with a rack to a replica on its rack (preferred_read_replica). Record
bytes come back as file slices that the connection sends with sendfile(2). Fetch sessions
(KIP-227) and topic ids (v13+) are resolved by pybroker.fetch.sessions: it says which
partitions to read and trims the answer of an incremental fetch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio.lowlevel

from pybroker import _core
from pybroker.errors import ErrorCode, KafkaError
from pybroker.fetch.sessions import FetchContext, new_context, records_length
from pybroker.handlers.leader_hint import LeaderHints
from pybroker.handlers.registry import handles
from pybroker.replica.selector import preferred_read_replica
from pybroker.security.authorizer import authorizer_for
from pybroker.security.checks import topic_reader

if TYPE_CHECKING:
    from pybroker.fetch.idle import IdleWatch
    from pybroker.handlers.context import BrokerContext
    from pybroker.replica.partition import ReplicaPartition
    from pybroker.server.dispatch import Request

MAX_BYTES_DEFAULT = 0x7FFFFFFF
READ_COMMITTED = 1
LEADER_MOVED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)
#: a fetch's partitions are read this many at a time (see read_all_sliced)
READ_SLICE_PARTITIONS = 128
#: the longest a fetch's reading holds the event loop before letting other tasks in
READ_SLICE_S = 0.01
#: marks the entry of a topic cut by `slices` that continues the one before it
CONTINUED = "_continued"


@handles(1, (4, 17))
async def handle_fetch(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    deadline = request.received_ms + max(0, body["max_wait_ms"]) / 1000
    min_bytes = body["min_bytes"]
    replica_id = body["replica_state"]["replica_id"] if request.version >= 15 \
        else body["replica_id"]
    follower = replica_id if replica_id >= 0 else None
    # KIP-392: a consumer on Fetch v11+ may read from a follower, and is told which
    # replica to read from when the leader's replica selector picks another one
    consumer_v11 = follower is None and request.version >= 11
    rack = body["rack_id"] if consumer_v11 else ""
    session = new_context(ctx.fetch_sessions, request.version, body, follower is not None,
                          ctx.metadata.topic_name)
    if session.error:
        return session.error_response()
    # an incremental fetch leaves unread the partitions with nothing new (idle); not a
    # consumer's with a rack, where the replica selector may send it elsewhere
    quiet = ctx.replicas if not rack else None
    # a consumer's READ, asked again for every partition of its session (a follower's
    # CLUSTER_ACTION was asked for the request)
    may_read = topic_reader(authorizer_for(ctx.config, ctx.admin.backend),
                            request.connection) if follower is None else None
    # a follower's fetch woken (or timed out) without an answer reads again only the
    # partitions that changed since its last pass (Repass), not every one it follows
    repass: Repass | None = None
    # a follower's position is taken from its request once, on the first pass (as Kafka's
    # readFromLog for a delayed fetch, readFromPurgatory): a pass after a wait reads
    # what came meanwhile, it is not a new fetch of the follower's (issue 26)
    first = True
    while True:
        if repass is not None and (read := await repass.reread(ctx, body, follower)):
            topics, total, errors, partitions = read
            requested, unknown, idle, denied = repass.requested, [], [], []
        else:
            requested, unknown, idle = session.topics(quiet, follower)
            if follower is not None and first and quiet is not None:
                # the partitions the follower's session watches as idle were fetched
                # now, at the log end (fetch/idle.py: not one by one); a partition
                # found idle now: the follower asks from our log end, as last time,
                # caught up now (its ISR lag) and maybe an ISR candidate, as a read
                # says; then watched, if it still is idle
                session.round_fetched()
                await _record_idle(ctx, follower, session)
            denied = []
            if may_read is not None:
                denied = [t for t in requested if not may_read(t["topic"])]
                requested = [t for t in requested if may_read(t["topic"])]
            if requested:
                topics, total, errors, partitions = await read_all_sliced(
                    ctx, body, follower, consumer_v11, rack, requested, record_position=first)
            else:  # every partition idle (a follower at the log end of all it follows)
                topics, total, errors, partitions = [], 0, False, []
        first = False
        if denied:
            errors = True
            topics += [{"topic": t["topic"], "partitions": [
                partition_error(p["partition"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in t["partitions"]]} for t in denied]
        partitions += idle
        remaining = deadline - time.monotonic()
        watch = session.idle_watch if follower is not None else None
        if total >= min_bytes or errors or unknown or remaining <= 0 or \
                not (partitions or (watch is not None and len(watch))):
            if total and follower is None:
                ctx.metrics.record_fetch(topics)
            # KIP-951's hints are for errors only; every error above sets `errors`
            endpoints = leader_hints(ctx, request, topics) \
                if errors and request.version >= 16 else []
            session_id, answers = session.respond(topics, unknown)
            if errors or unknown:
                ctx.metrics.record_fetch_errors(answers)
            if session.error:
                return session.error_response() | {"session_id": session_id}
            return {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id,
                    "responses": answers, "node_endpoints": endpoints}
        if follower is not None and repass is None and len(partitions) > READ_SLICE_PARTITIONS:
            # a pass of one slice is cheaper to make again than to keep (its snapshot and
            # re-check cost about what it saves, at every parked fetch, issue 26)
            repass = Repass(requested, topics, total, partitions, len(idle), watch)
            await repass.snapshot()
        # woken when what this fetch may read grows: a consumer reads up to the high
        # watermark, a follower up to the leader's log end (of a partition its session
        # watches as idle: one key for them all, the watch, issue 25)
        keys: list[Any] = [p.leo_key if follower is not None else p.hw_key
                           for p in partitions]
        if watch is not None:
            keys.append(watch)
        await ctx.purgatory.wait_for_notify("fetch", keys, remaining)


async def _record_idle(ctx: BrokerContext, follower: int, session: FetchContext) -> None:
    """Record the position of each partition of a follower's fetch found idle at its
    first pass (its fetch offset, our log end when it was looked at), then have the
    session watch it. Paced beyond one slice (a session's first incremental round
    finds them all idle)."""
    newly = session.newly_idle
    if len(newly) <= READ_SLICE_PARTITIONS:  # the usual round: a few, no pacing
        for key, cached, partition in newly:
            partition.record_follower_fetch(follower, cached.fetch_offset)
            session.watch(ctx.replicas, follower, key, cached, partition)
        return
    started = time.monotonic()
    for n, (key, cached, partition) in enumerate(newly):
        partition.record_follower_fetch(follower, cached.fetch_offset)
        session.watch(ctx.replicas, follower, key, cached, partition)
        if not n % READ_SLICE_PARTITIONS and time.monotonic() - started > READ_SLICE_S:
            await anyio.lowlevel.checkpoint()
            started = time.monotonic()


def _answer_state(partition: ReplicaPartition) -> tuple[object, ...]:
    """What a follower's answer for `partition` depends on, besides its fetch offset:
    the log's end and start, the high watermark (the last stable offset follows it
    and the log end), who leads at which epoch, and the followers it knows."""
    log = partition.log
    return (log.log.log_end_offset, log.high_watermark, log.log.log_start_offset,
            partition.leader, partition.leader_epoch, partition.followers)


#: never equal to a partition's state: it is read at every pass
_READ_AGAIN = (object(),)


class Repass:
    """A follower's fetch that read nothing to answer with waits, then reads again: every
    partition it follows from this leader (thousands at 10,000 partitions RF 3), at
    each wake-up and at its deadline, though one partition's log end moved or none
    did, was among the event loop's longest stalls (issue 25). This keeps the last
    pass's answers and the state each was read at (`_answer_state`: a few attribute
    reads a partition against a full read); `reread` reads again only the partitions
    whose state moved, so the answer is what a full pass would give. No partition is
    recorded as fetched again (nor is one read again, see handle_fetch): its fetch
    offset is the one already recorded at the first pass, within the fetch's max_wait_ms.

    Any error on a partition read again answers from a full pass instead (the old
    path: the session's topics resolved afresh, as a topic deleted meanwhile needs)."""

    def __init__(self, requested: list[dict[str, Any]], topics: list[dict[str, Any]],
                 total: int, partitions: list[ReplicaPartition], idle: int,
                 watch: IdleWatch | None = None) -> None:
        self.requested = requested
        #: the session's watch of its idle partitions, and its moves at the snapshot: a
        #: watched partition that changed since needs a full pass
        self._watch = watch
        self._moves = watch.moves if watch is not None else 0
        self._topics = topics
        self._total = total
        #: per partition, in order: (topic index, position in it, partition, state)
        self._read: list[tuple[int, int, ReplicaPartition, tuple[object, ...]]] = []
        #: the session's idle partitions (not read, not answered) and their states: one
        #: that moved needs a full pass
        self._idle: list[tuple[ReplicaPartition, tuple[object, ...]]] = []
        self._partitions = partitions
        self._idle_count = idle

    async def snapshot(self) -> None:
        """Note every partition's state, letting other tasks in every READ_SLICE_S."""
        partitions, idle = self._partitions, self._idle_count
        started = time.monotonic()
        for n, partition in enumerate(partitions[len(partitions) - idle:]):
            self._idle.append((partition, _answer_state(partition)))
            if not n % READ_SLICE_PARTITIONS and time.monotonic() - started > READ_SLICE_S:
                await anyio.lowlevel.checkpoint()
                started = time.monotonic()
        # no error in the pass (or it would have answered): every partition asked was
        # read, in the order asked, one answer each
        it = iter(partitions)
        for t, topic in enumerate(self._topics):
            for i in range(len(topic["partitions"])):
                partition = next(it)
                self._read.append((t, i, partition, self._state(t, i, partition)))
            if time.monotonic() - started > READ_SLICE_S:
                await anyio.lowlevel.checkpoint()
                started = time.monotonic()

    def _state(self, t: int, i: int, partition: ReplicaPartition) -> tuple[object, ...]:
        state = _answer_state(partition)
        if (not records_length(self._topics[t]["partitions"][i]["records"])
                and self.requested[t]["partitions"][i]["fetch_offset"] < state[0]):
            # records there but none read: held back by a replication throttle or the
            # fetch's byte limits, which may let them through by the next pass
            return _READ_AGAIN
        return state

    async def reread(self, ctx: BrokerContext, body: dict[str, Any], follower: int | None
                     ) -> tuple[list[dict[str, Any]], int, bool, list[ReplicaPartition]] | None:
        """(topics, bytes, errors, partitions) as a full pass would give them now, or
        None when a full pass must be made (an error)."""
        if self._watch is not None and self._watch.moves != self._moves:
            return None
        pace_started = time.monotonic()
        for n, (partition, state) in enumerate(self._idle):
            if _answer_state(partition) != state:
                return None
            if not n % READ_SLICE_PARTITIONS and time.monotonic() - pace_started > READ_SLICE_S:
                await anyio.lowlevel.checkpoint()
                pace_started = time.monotonic()
        moved: list[int] = []
        for n, (_, _, partition, state) in enumerate(self._read):
            if _answer_state(partition) != state:
                moved.append(n)
            if not n % READ_SLICE_PARTITIONS and time.monotonic() - pace_started > READ_SLICE_S:
                await anyio.lowlevel.checkpoint()
                pace_started = time.monotonic()
        if not moved:
            return self._topics, self._total, False, self._waited_on()
        asked: list[dict[str, Any]] = []
        for n in moved:
            t, i, _, _ = self._read[n]
            topic = self.requested[t]
            if asked and asked[-1]["_t"] == t:
                asked[-1]["partitions"].append(topic["partitions"][i])
            else:
                asked.append({**topic, "partitions": [topic["partitions"][i]], "_t": t})
        old_bytes = sum(records_length(self._topics[self._read[n][0]]["partitions"]
                                       [self._read[n][1]]["records"]) for n in moved)
        answered, total, errors, _ = await read_all_sliced(
            ctx, body, follower, requested=asked, record_position=False)
        if errors:
            return None
        total += self._total - old_bytes
        new_answers = iter(p for topic in answered for p in topic["partitions"])
        for n in moved:
            t, i, partition, _ = self._read[n]
            self._topics[t]["partitions"][i] = next(new_answers)
            self._read[n] = (t, i, partition, self._state(t, i, partition))
        self._total = total
        return self._topics, total, False, self._waited_on()

    def _waited_on(self) -> list[ReplicaPartition]:
        """Every partition the fetch waits on: those read, then the idle ones."""
        return [r[2] for r in self._read] + [p for p, _ in self._idle]


def leader_hints(ctx: BrokerContext, request: Request,
                 topics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """KIP-951 (v16+): a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    names its current leader; the answer's node endpoints (Kafka's KafkaApis)."""
    hints = LeaderHints(ctx.metadata, request.connection)
    for topic in topics:
        for p in topic["partitions"]:
            if p["error_code"] in LEADER_MOVED:
                p["current_leader"] = hints.current_leader(topic["topic"], p["partition_index"])
    return hints.node_endpoints()


async def read_all_sliced(
    ctx: BrokerContext, body: dict[str, Any], follower: int | None = None,
    any_replica: bool = False, client_rack: str = "",
    requested: list[dict[str, Any]] | None = None, *, record_position: bool = True,
) -> tuple[list[dict[str, Any]], int, bool, list[ReplicaPartition]]:
    """read_all, READ_SLICE_PARTITIONS partitions at a time, letting other tasks in
    whenever READ_SLICE_S has gone: a follower's fetch covers every partition it
    follows from this leader (thousands), and reading them in one go held every other
    request up for hundreds of ms on a loaded machine (issue 25). Each partition is
    read once, in the request's order; the bytes limit runs over the whole fetch."""
    source = body["topics"] if requested is None else requested
    count = 0
    for topic in source:  # a loop, not sum() of a generator: this runs for every fetch
        count += len(topic["partitions"])
    if count <= READ_SLICE_PARTITIONS:
        # one slice (a consumer, or a follower of a few partitions from this leader):
        # what the loop below would do, without the slicing (issue 26)
        return read_all(ctx, body, follower, any_replica, client_rack, source,
                        record_position=record_position)
    topics: list[dict[str, Any]] = []
    total = 0
    errors = False
    seen: list[ReplicaPartition] = []
    started = time.monotonic()
    for piece in slices(source, READ_SLICE_PARTITIONS):
        if time.monotonic() - started > READ_SLICE_S:
            await anyio.lowlevel.checkpoint()
            started = time.monotonic()
        answered, total, failed, read = read_all(ctx, body, follower, any_replica,
                                                 client_rack, piece, total,
                                                 record_position=record_position)
        for asked, topic in zip(piece, answered, strict=True):
            if asked.get(CONTINUED):  # the rest of a topic cut between slices
                topics[-1]["partitions"] += topic["partitions"]
            else:
                topics.append(topic)
        errors |= failed
        seen += read
    return topics, total, errors, seen


def slices(topics: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    """The requested topics in pieces of at most `size` partitions, in order; a topic
    with more is cut into several entries (each a copy naming part of its partitions,
    those after the first marked CONTINUED)."""
    piece: list[dict[str, Any]] = []
    room = size
    for topic in topics:
        partitions = topic["partitions"]
        start = 0
        while start < len(partitions) or (not partitions and start == 0):
            take = partitions[start:start + room]
            piece.append(topic if start == 0 and len(take) == len(partitions)
                         else {**topic, "partitions": take, CONTINUED: start > 0})
            room -= len(take)
            start += max(len(take), 1)
            if room <= 0:
                yield piece
                piece, room = [], size
    if piece:
        yield piece


def read_all(
    ctx: BrokerContext, body: dict[str, Any], follower: int | None = None,
    any_replica: bool = False, client_rack: str = "",
    requested: list[dict[str, Any]] | None = None, total: int = 0, *,
    record_position: bool = True,
) -> tuple[list[dict[str, Any]], int, bool, list[ReplicaPartition]]:
    """One pass over the requested partitions: (responses, bytes, any error, partitions).
    `requested` (the fetch session's partitions, in fetch order) stands for the body's
    `topics`; `total` is what earlier passes of the same fetch read (the returned bytes
    include it).

    For a follower's fetch (`follower` is its broker id) the leader first notes
    how far the follower has got (its fetch offset; not `record_position`: a pass
    after the fetch waited, which has noted it already) — that may move the high
    watermark — and then reads up to its log end rather than the high watermark."""
    max_bytes = body["max_bytes"] or MAX_BYTES_DEFAULT
    # read_committed (isolation_level 1): a consumer reads up to the last stable
    # offset and is told the aborted transactions of what it reads
    read_committed = follower is None and body["isolation_level"] == READ_COMMITTED
    errors = False
    seen: list[ReplicaPartition] = []
    topics = []
    for topic in body["topics"] if requested is None else requested:
        name = topic["topic"]
        results = []
        for p in topic["partitions"]:
            index = p["partition"]
            try:
                if any_replica:
                    partition = ctx.replicas.replica_for(name, index, p["current_leader_epoch"])
                else:
                    partition = ctx.replicas.leader_for(name, index, p["current_leader_epoch"])
            except KafkaError as exc:
                errors = True
                results.append(partition_error(index, exc.code))
                continue
            preferred = preferred_read_replica(
                ctx.config["replica.selector.class"], partition, client_rack,
                {b.node_id: b.rack for b in ctx.metadata.brokers.values()},
                int(time.monotonic() * 1000)) if client_rack else -1
            if preferred >= 0:
                # sent elsewhere: no records from here (Kafka answers this way too)
                results.append({**partition_error(index, ErrorCode.NONE),
                                "high_watermark": partition.high_watermark,
                                "last_stable_offset": partition.high_watermark,
                                "log_start_offset": partition.log_start_offset,
                                "preferred_read_replica": preferred})
                errors = True  # answer now: the consumer has somewhere else to go
                continue
            if follower is not None and follower not in partition.followers:
                # not a replica of this partition (Kafka's followerReplicaOrThrow): it
                # reads nothing above the high watermark and its offset counts for nothing
                errors = True
                results.append(partition_error(index, ErrorCode.UNKNOWN_LEADER_EPOCH
                                               if p["current_leader_epoch"] >= 0
                                               else ErrorCode.NOT_LEADER_OR_FOLLOWER))
                continue
            seen.append(partition)
            if follower is not None and record_position:
                partition.record_follower_fetch(follower, p["fetch_offset"])
            limit = min(p["partition_max_bytes"], max_bytes - total)
            records = None
            # a reassignment's throttle (leader.replication.throttled.*) holds back
            # replicas out of the ISR while the rate is above its bound
            held = follower is not None and ctx.replicas.leader_throttled(partition, follower)
            if (limit > 0 or total == 0) and not held:
                try:
                    # KIP-74: the first batch of the response comes whole even past the limits
                    records = partition.read(p["fetch_offset"], max(limit, 0), total == 0,
                                             committed_only=follower is None,
                                             read_committed=read_committed)
                except _core.OffsetOutOfRangeError:
                    # as Kafka's ReplicaManager (createLogReadResult): no offsets with
                    # the error, -1 for the watermarks and the log start
                    results.append(partition_error(index, ErrorCode.OFFSET_OUT_OF_RANGE))
                    errors = True
                    continue
            if records is not None:
                total += records.length
                if follower is not None:
                    ctx.replicas.record_leader_replication(partition, follower, records.length)
            hw = partition.high_watermark
            lso = partition.last_stable_offset
            aborted = None
            if read_committed:
                aborted = [{"producer_id": pid, "first_offset": first} for pid, first in
                           partition.aborted_transactions(p["fetch_offset"], lso)
                           ] if records is not None else []
            results.append({
                "partition_index": index,
                "error_code": 0,
                "high_watermark": hw,
                "last_stable_offset": lso,
                "log_start_offset": partition.log_start_offset,
                "aborted_transactions": aborted,
                "preferred_read_replica": -1,
                "records": records if records is not None else b"",
            })
        topics.append({"topic": name, "partitions": results})
    return topics, total, errors, seen


def partition_error(index: int, code: ErrorCode) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": int(code),
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
