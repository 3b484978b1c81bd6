"""Incremental fetch sessions (KIP-227): the broker remembers what a fetcher asked for,
so the next fetch names only what changed and the answer leaves out what did not.

A Fetch request carries (session_id, session_epoch):
  * epoch 0 (INITIAL): a full fetch; any session named is closed, and a new one is
    created from this request if the cache has (or can make) room. The answer carries
    the new session id (0 when none was cached) and every partition.
  * epoch -1 (FINAL): a full fetch with no session ("sessionless"); the named session
    is closed. This is also what a fetch below v7 is.
  * epoch > 0: an incremental fetch in session `session_id`: the partitions named are
    added or updated, `forgotten_topics_data` are removed, all others are fetched as
    last asked. FETCH_SESSION_ID_NOT_FOUND when the session is unknown (evicted),
    INVALID_FETCH_SESSION_EPOCH when the epoch is not the one expected,
    FETCH_SESSION_TOPIC_ID_ERROR when the request switches between names (< v13) and
    topic ids (v13+). The answer holds only the partitions that changed (Kafka's
    CachedPartition rule): records, an error, a new high watermark, last stable offset
    or log start offset, a preferred read replica or a diverging epoch. A partition
    that answered is moved to the end of the session, so the next fetch reads the
    others first (fairness under `max_bytes`).
The epoch after n (n >= 0) is n + 1, wrapping to 1 after 2^31 - 1.

The cache holds `max.incremental.fetch.session.cache.slots` sessions. A new session
may take a full cache's slot (Kafka's FetchSessionCache.tryEvict) from:
  1. the least recently used session, when it has been idle over EVICTION_MS;
  2. else the least valuable evictable session, ordered (privileged, size, id), when
     the newcomer is worth at least as much. Followers' sessions are privileged; a
     session is evictable by a consumer only after EVICTION_MS from its creation, by
     a follower at once when it is a consumer's.
A session idle over EVICTION_MS can no longer be told apart from a dead fetcher's:
besides rule 1, `sweep` frees such sessions at most once per SWEEP_INTERVAL_S (Kafka
keeps them until a slot is wanted; a fetcher that comes back after that long gets
FETCH_SESSION_ID_NOT_FOUND and starts over with a full fetch, which clients do)."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

from pybroker.errors import ErrorCode
from pybroker.fetch.idle import IdleWatch
from pybroker.protocol.types import ZERO_UUID

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
EVICTION_MS = 120_000
SWEEP_INTERVAL_S = 10.0
SESSION_ID_MAX = 0x7FFFFFFF

#: a partition of a session: (topic id, partition) from v13, else (topic name, partition)
PartitionKey = tuple[uuid.UUID | str, int]

#: the fetch order of a session's partitions: a partition's number is taken when it
#: joins the session or moves to its end (FetchSession.partitions' insertion order)
_ORDER = itertools.count()


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == SESSION_ID_MAX else epoch + 1


@dataclasses.dataclass(slots=True)
class CachedPartition:
    """What a fetcher last asked of one partition, and what it was last told."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    log_start_offset: int
    last_fetched_epoch: int
    # as last answered; -1 forces the next answer (Kafka sets the high watermark to -1
    # after an error so the partition is sent again once the error is gone)
    high_watermark: int = -1
    last_stable_offset: int = -1
    local_log_start_offset: int = -1
    #: request()'s fields, kept until the fetcher asks something else (update_request):
    #: a follower's session is read on every fetch round trip, most partitions unchanged
    _request: dict[str, Any] | None = dataclasses.field(default=None, compare=False,
                                                        repr=False)
    #: its place in the session's fetch order (see _ORDER)
    order: int = dataclasses.field(default_factory=_ORDER.__next__, compare=False,
                                   repr=False)

    def update_request(self, p: dict[str, Any]) -> None:
        self._request = None
        self.fetch_offset = p["fetch_offset"]
        self.partition_max_bytes = p["partition_max_bytes"]
        self.current_leader_epoch = p.get("current_leader_epoch", -1)
        self.log_start_offset = p.get("log_start_offset", -1)
        self.last_fetched_epoch = p.get("last_fetched_epoch", -1)

    def request(self) -> dict[str, Any]:
        """The partition's fields as the request's would be; the same dict while they
        have not changed (its readers never change it)."""
        request = self._request
        if request is None:
            request = self._request = {
                "partition": self.partition, "current_leader_epoch": self.current_leader_epoch,
                "fetch_offset": self.fetch_offset,
                "last_fetched_epoch": self.last_fetched_epoch,
                "log_start_offset": self.log_start_offset,
                "partition_max_bytes": self.partition_max_bytes}
        return request

    def must_respond(self, answer: dict[str, Any]) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: whether `answer` goes into an
        incremental response; remembers what it tells."""
        respond = False
        records = answer.get("records")
        if records is not None and records_length(records) > 0:
            respond = True
        if self.high_watermark != answer["high_watermark"]:
            respond = True
            self.high_watermark = answer["high_watermark"]
        if self.local_log_start_offset != answer["log_start_offset"]:
            respond = True
            self.local_log_start_offset = answer["log_start_offset"]
        if self.last_stable_offset != answer.get("last_stable_offset", -1):
            respond = True
            self.last_stable_offset = answer.get("last_stable_offset", -1)
        if answer.get("preferred_read_replica", -1) != -1:
            respond = True
        diverging = answer.get("diverging_epoch")
        if diverging and diverging.get("epoch", -1) != -1:
            respond = True
        if answer["error_code"] != 0:
            self.high_watermark = -1
            respond = True
        return respond


def _idle(replicas: Any, cached: CachedPartition) -> Any | None:
    """The partition, when a consumer's read of it now could only give what `cached`
    was last told: it leads it at the epoch asked for, the fetch offset is at the high
    watermark, and neither the high watermark nor the log start moved. The last stable
    offset cannot have moved either when it equalled the (unchanged) high watermark."""
    partition = replicas.partitions.get((cached.topic, cached.partition))
    if partition is None or not partition.is_leader:
        return None
    if cached.current_leader_epoch not in (-1, partition.leader_epoch):
        return None
    hw = partition.high_watermark
    if cached.fetch_offset != hw or cached.high_watermark != hw or \
            cached.last_stable_offset != hw or \
            cached.local_log_start_offset != partition.log_start_offset:
        return None
    return partition


def _follower_idle(replicas: Any, cached: CachedPartition, follower: int) -> Any | None:
    """The partition, when a follower's read of it now could only give what `cached`
    was last told (so an incremental answer leaves it out): led here at the epoch
    asked for, by a leader that counts `follower` among its followers, the fetch
    offset at the log end (nothing to read, not out of range), and the high
    watermark, last stable offset and log start as last told."""
    partition = replicas.partitions.get((cached.topic, cached.partition))
    if partition is None or not partition.is_leader or follower not in partition.followers:
        return None
    if cached.current_leader_epoch not in (-1, partition.leader_epoch):
        return None
    log = partition.log
    if log.offline or cached.fetch_offset != log.log.log_end_offset or \
            cached.high_watermark != log.high_watermark or \
            cached.last_stable_offset != partition.last_stable_offset or \
            cached.local_log_start_offset != log.log.log_start_offset:
        return None
    return partition


def records_length(records: Any) -> int:
    """Bytes of a partition answer's `records`: b"" (nothing read), a memoryview, or a
    file slice (its `length`; sent later with sendfile)."""
    if isinstance(records, memoryview):
        return records.nbytes
    length = getattr(records, "length", None)
    return int(length) if length is not None else len(records)


@dataclasses.dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    #: in fetch order (insertion order; a partition that answered moves to the end)
    partitions: dict[PartitionKey, CachedPartition]
    creation_ms: int
    last_used_ms: int
    epoch: int
    #: a follower's session: its partitions known to be idle (fetch/idle.py), made at
    #: its first incremental fetch
    idle: IdleWatch | None = None

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, len(self.partitions), self.id)

    def close(self) -> None:
        if self.idle is not None:
            self.idle.close()
            self.idle = None


class FetchSessionCache:
    """Every fetch session of this broker (Kafka's FetchSessionCache), bounded by
    `max.incremental.fetch.session.cache.slots`."""

    def __init__(self, max_entries: int, eviction_ms: int = EVICTION_MS,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self._swept_ms = self._clock_ms()

    def now_ms(self) -> int:
        return self._clock_ms()

    @property
    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms

    def maybe_create(self, privileged: bool, uses_topic_ids: bool,
                     partitions: dict[PartitionKey, CachedPartition]) -> int:
        """Cache a new session holding `partitions`; its id, or INVALID_SESSION_ID when
        the cache is full and nothing may be evicted for it."""
        if not self.make_room(privileged, len(partitions)):
            return INVALID_SESSION_ID
        now = self.now_ms()
        session = FetchSession(self._new_id(), privileged, uses_topic_ids, partitions,
                               now, now, next_epoch(INITIAL_EPOCH))
        self.sessions[session.id] = session
        return session.id

    def make_room(self, privileged: bool, size: int) -> bool:
        """Whether a new session of `size` partitions may be cached (evicting one for it
        when the cache is full and Kafka's policy allows)."""
        if len(self.sessions) < self.max_entries:
            return True
        return self._try_evict(privileged, (privileged, size, 0), self.now_ms())

    def sweep(self, now: int | None = None) -> None:
        """Free sessions idle over eviction_ms (their fetchers are gone or will start over).
        `now`: the clock's ms, when the caller has just read it."""
        if now is None:
            now = self.now_ms()
        if now - self._swept_ms < SWEEP_INTERVAL_S * 1000:
            return
        self._swept_ms = now
        for session in [s for s in self.sessions.values()
                        if now - s.last_used_ms > self.eviction_ms]:
            del self.sessions[session.id]
            session.close()
            self.evictions += 1

    def _new_id(self) -> int:
        while True:
            candidate = random.randint(1, SESSION_ID_MAX - 1)  # noqa: S311 - not a secret
            if candidate not in self.sessions:
                return candidate

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            self._evict(stale)
            return True
        # a consumer may evict only sessions past their first eviction_ms; a follower
        # also any consumer's session
        candidates = [s for s in self.sessions.values()
                      if now - s.creation_ms > self.eviction_ms
                      or (privileged and not s.privileged)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if key < victim.evictable_key():
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        log.debug("evicting fetch session %d (%d partitions)", session.id,
                  len(session.partitions))
        del self.sessions[session.id]
        session.close()
        self.evictions += 1


#: a partition whose topic id names no topic: (topic id, partition)
Unknown = tuple[uuid.UUID, int]


class FetchContext:
    """One Fetch request's view of its session: which partitions to read, and how to
    answer. Built by `new_context`; `error` set means answer with that error alone.

    A sessionless or full fetch reads the request's own partitions as they came (no
    per-partition work here: librdkafka sends only such fetches); a full fetch builds
    its session's partitions only when the cache has room for it."""

    def __init__(self, cache: FetchSessionCache, kind: str, *, privileged: bool,
                 uses_topic_ids: bool, error: ErrorCode = ErrorCode.NONE,
                 session: FetchSession | None = None, request_epoch: int = FINAL_EPOCH,
                 requested: list[dict[str, Any]] | None = None,
                 unknown: list[Unknown] | None = None,
                 topic_name: Callable[[uuid.UUID], str | None] | None = None) -> None:
        self.cache = cache
        self.kind = kind  # "error" | "sessionless" | "full" | "incremental"
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.error = error
        self.session = session
        self.request_epoch = request_epoch
        self._requested = requested or []
        self._unknown = unknown or []
        self._topic_name = topic_name
        #: topic name -> id of what topics() gave to read (v13+ answers carry ids)
        self._ids: dict[str, uuid.UUID] = {t["topic"]: t["topic_id"] for t in self._requested}
        #: a follower's partitions topics() last found idle that its session does not
        #: watch yet: (key, as cached, partition)
        self.newly_idle: list[tuple[PartitionKey, CachedPartition, Any]] = []

    def topics(self, replicas: Any = None, follower: int | None = None
               ) -> tuple[list[dict[str, Any]], list[Unknown], list[Any]]:
        """The partitions to read, grouped by topic in fetch order, as the request's
        `topics` ({"topic": name, "topic_id", "partitions": [...]}); the partitions
        whose topic id names no topic (they answer UNKNOWN_TOPIC_ID); and, for an
        incremental fetch given `replicas`, the partitions left unread because their
        answer could only repeat the last one (`idle`): the fetch waits on them all the
        same. A follower's (`follower`, its broker id) are idle only at the log end, as
        last asked: the caller records that fetch offset for each (its ISR lag), which
        costs a fraction of a read (thousands of partitions a follower, issue 25)."""
        if self.session is None:
            return self._requested, self._unknown, []
        if replicas is not None and follower is not None:
            return self._follower_topics(replicas, follower)
        topics: list[dict[str, Any]] = []
        unknown: list[Unknown] = []
        idle: list[Any] = []
        quiet = replicas is not None
        # a session naming topics by id asks again each time: a topic deleted (and maybe
        # re-created under its name) since is UNKNOWN_TOPIC_ID, never the new topic
        resolve = self._topic_name if self.uses_topic_ids else None
        last: dict[str, Any] | None = None
        for cached in self.session.partitions.values():
            if resolve is not None:
                cached.topic = resolve(cached.topic_id) or ""
            if not cached.topic:
                unknown.append((cached.topic_id, cached.partition))
                continue
            if quiet and (partition := _idle(replicas, cached) if follower is None
                          else _follower_idle(replicas, cached, follower)) is not None:
                idle.append(partition)
                continue
            if last is None or last["topic"] != cached.topic:
                last = {"topic": cached.topic, "topic_id": cached.topic_id, "partitions": []}
                topics.append(last)
                self._ids[cached.topic] = cached.topic_id
            last["partitions"].append(cached.request())
        return topics, unknown, idle

    def _follower_topics(self, replicas: Any, follower: int
                         ) -> tuple[list[dict[str, Any]], list[Unknown], list[Any]]:
        """topics() of a follower's incremental fetch: the partitions its session
        watches as idle (fetch/idle.py) are not looked at, the others in fetch order;
        those found idle now are `newly_idle`, for the caller to record and `watch`."""
        session = self.session
        assert session is not None
        watch = session.idle
        if watch is None or watch.follower != follower:
            session.close()
            watch = session.idle = IdleWatch(follower, list(session.partitions))
        watch.round_started()
        partitions = session.partitions
        topics: list[dict[str, Any]] = []
        unknown: list[Unknown] = []
        idle: list[Any] = []
        newly: list[tuple[PartitionKey, CachedPartition, Any]] = []
        resolve = self._topic_name if self.uses_topic_ids else None
        last: dict[str, Any] | None = None
        for key in sorted(watch.active, key=lambda k: partitions[k].order):
            cached = partitions[key]
            if resolve is not None:
                cached.topic = resolve(cached.topic_id) or ""
            if not cached.topic:
                unknown.append((cached.topic_id, cached.partition))
                continue
            if (partition := _follower_idle(replicas, cached, follower)) is not None:
                idle.append(partition)
                newly.append((key, cached, partition))
                continue
            if last is None or last["topic"] != cached.topic:
                last = {"topic": cached.topic, "topic_id": cached.topic_id, "partitions": []}
                topics.append(last)
                self._ids[cached.topic] = cached.topic_id
            last["partitions"].append(cached.request())
        self.newly_idle = newly
        return topics, unknown, idle

    def round_fetched(self) -> None:
        """At a follower's fetch's first pass: the partitions its session watches as
        idle were fetched now, from the log end."""
        if self.session is not None and self.session.idle is not None:
            self.session.idle.fetched()

    def watch(self, replicas: Any, follower: int, key: PartitionKey, cached: CachedPartition,
              partition: Any) -> None:
        """Watch a partition of `newly_idle` as idle, its position recorded at this
        first pass, if it still is idle (the caller may have let other tasks in since
        topics(), and the record itself may have moved the high watermark)."""
        watch = self.session.idle if self.session is not None else None
        if watch is not None and _follower_idle(replicas, cached, follower) is partition:
            watch.watch(key, partition)

    @property
    def idle_watch(self) -> IdleWatch | None:
        """A follower's session's watch of its idle partitions (a fetch waits on them
        too, through it)."""
        return self.session.idle if self.session is not None else None

    def error_response(self) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": int(self.error),
                "session_id": INVALID_SESSION_ID, "responses": []}

    def respond(self, responses: list[dict[str, Any]],
                unknown: list[Unknown]) -> tuple[int, list[dict[str, Any]]]:
        """(session id, topics) to answer with, given what was read; creates the session
        of a full fetch and prunes an incremental answer to what changed."""
        answers = responses
        if self.uses_topic_ids:
            errors: dict[uuid.UUID, dict[str, Any]] = {}
            for topic_id, index in unknown:
                errors.setdefault(topic_id, {"topic": "", "topic_id": topic_id,
                                             "partitions": []})
                errors[topic_id]["partitions"].append(unknown_topic_id(index))
            answers = list(errors.values()) + [
                dict(t, topic_id=self._ids.get(t["topic"], ZERO_UUID)) for t in responses]
        if self.kind == "sessionless":
            return INVALID_SESSION_ID, answers
        if self.kind == "full":
            return self._create(answers), answers
        session = self.session
        assert session is not None
        if session.epoch != next_epoch(self.request_epoch) or \
                self.cache.get(session.id) is not session:
            # another fetch of the same session came between (a duplicate request)
            self.error = ErrorCode.INVALID_FETCH_SESSION_EPOCH
            return session.id, []
        pruned = []
        for topic in answers:
            kept = []
            for answer in topic["partitions"]:
                key = self._key(topic, answer["partition_index"])
                cached = session.partitions.get(key)
                if cached is None or not cached.must_respond(answer):
                    continue
                kept.append(answer)
                del session.partitions[key]  # to the end of the fetch order
                session.partitions[key] = cached
                cached.order = next(_ORDER)
            if kept:
                pruned.append(dict(topic, partitions=kept))
        return session.id, pruned

    def _create(self, answers: list[dict[str, Any]]) -> int:
        """The new session of a full fetch (its partitions as asked and as answered), or
        INVALID_SESSION_ID when the cache has no room for it."""
        size = sum(len(t["partitions"]) for t in self._requested) + len(self._unknown)
        if not self.cache.make_room(self.privileged, size):
            return INVALID_SESSION_ID
        partitions: dict[PartitionKey, CachedPartition] = {}
        for topic_id, index in self._unknown:
            partitions[(topic_id, index)] = _cached("", topic_id, {"partition": index})
        for topic in self._requested:
            for p in topic["partitions"]:
                cached = _cached(topic["topic"], topic["topic_id"], p)
                partitions[self._key(topic, p["partition"])] = cached
        for topic in answers:
            for answer in topic["partitions"]:
                cached = partitions.get(self._key(topic, answer["partition_index"]))
                if cached is not None:
                    cached.must_respond(answer)
        return self.cache.maybe_create(self.privileged, self.uses_topic_ids, partitions)

    def _key(self, topic: dict[str, Any], partition: int) -> PartitionKey:
        return (topic["topic_id"] if self.uses_topic_ids else topic["topic"], partition)


def _cached(name: str, topic_id: uuid.UUID, p: dict[str, Any]) -> CachedPartition:
    cached = CachedPartition(name, topic_id, p["partition"], 0, 0, -1, -1, -1)
    cached.update_request({"fetch_offset": 0, "partition_max_bytes": 0} | p)
    return cached


def unknown_topic_id(index: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID),
            "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
            "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}


def new_context(cache: FetchSessionCache, version: int, body: dict[str, Any],
                privileged: bool, topic_name: Callable[[uuid.UUID], str | None]) -> FetchContext:
    """Kafka's FetchManager.newContext: resolve the request's session, apply its changes.
    `topic_name` maps a topic id to its topic's name (None: no such topic)."""
    # the clock read once per fetch: for the sweep and for the session's last use
    now = cache.now_ms()
    cache.sweep(now)
    uses_ids = version >= 13
    session_id = body.get("session_id", INVALID_SESSION_ID) if version >= 7 else 0
    epoch = body.get("session_epoch", FINAL_EPOCH) if version >= 7 else FINAL_EPOCH
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        kind = "sessionless" if epoch == FINAL_EPOCH else "full"
        requested, unknown = _resolve(body, uses_ids, topic_name)
        return FetchContext(cache, kind, privileged=privileged, uses_topic_ids=uses_ids,
                            requested=requested, unknown=unknown)
    session = cache.get(session_id)
    if session is None:
        return FetchContext(cache, "error", privileged=privileged, uses_topic_ids=uses_ids,
                            error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext(cache, "error", privileged=privileged, uses_topic_ids=uses_ids,
                            error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_ids:
        return FetchContext(cache, "error", privileged=privileged, uses_topic_ids=uses_ids,
                            error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    requested, unknown = _resolve(body, uses_ids, topic_name)
    # a follower's session watching idle partitions: what the request names is looked
    # at again (asked otherwise, or new), what it forgets no longer
    watch = session.idle
    for topic in requested:
        for p in topic["partitions"]:
            key = (topic["topic_id"] if uses_ids else topic["topic"], p["partition"])
            existing = session.partitions.get(key)
            if existing is None:
                session.partitions[key] = _cached(topic["topic"], topic["topic_id"], p)
            else:
                existing.update_request(p)
                existing.topic = topic["topic"]  # an id may have come to name a topic again
            if watch is not None:
                watch.release(key)
    for topic_id, index in unknown:
        existing = session.partitions.get((topic_id, index))
        if existing is None:
            session.partitions[(topic_id, index)] = _cached("", topic_id, {"partition": index})
        else:
            existing.topic = ""  # its topic is gone
        if watch is not None:
            watch.release((topic_id, index))
    for topic in body.get("forgotten_topics_data") or []:
        name_or_id = topic["topic_id"] if uses_ids else topic["topic"]
        for index in topic["partitions"]:
            if session.partitions.pop((name_or_id, index), None) is not None and \
                    watch is not None:
                watch.forget((name_or_id, index))
    if not session.partitions:
        cache.remove(session.id)
        return FetchContext(cache, "sessionless", privileged=privileged,
                            uses_topic_ids=uses_ids, requested=requested, unknown=unknown)
    cache.touch(session, now)
    session.epoch = next_epoch(session.epoch)
    return FetchContext(cache, "incremental", privileged=privileged, uses_topic_ids=uses_ids,
                        session=session, request_epoch=epoch, topic_name=topic_name)


def _resolve(body: dict[str, Any], uses_ids: bool, topic_name: Callable[[uuid.UUID], str | None],
             ) -> tuple[list[dict[str, Any]], list[Unknown]]:
    """The request's topics as `topics()` gives them ({"topic", "topic_id", "partitions"},
    the partitions untouched), and the partitions of topic ids that name no topic."""
    if not uses_ids:
        return [{"topic": t["topic"], "topic_id": ZERO_UUID, "partitions": t["partitions"]}
                for t in body["topics"]], []
    topics: list[dict[str, Any]] = []
    unknown: list[Unknown] = []
    for t in body["topics"]:
        topic_id = t["topic_id"]
        name = topic_name(topic_id)
        if name is None:
            unknown += [(topic_id, p["partition"]) for p in t["partitions"]]
        else:
            topics.append({"topic": name, "topic_id": topic_id, "partitions": t["partitions"]})
    return topics, unknown
