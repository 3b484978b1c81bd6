"""FetchSessionCache and FetchContext: Kafka's eviction policy and response pruning,
on a hand-driven clock."""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.errors import ErrorCode
from pybroker.fetch.sessions import (
    EVICTION_MS,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSessionCache,
    _cached,
    new_context,
    next_epoch,
)
from pybroker.protocol.types import ZERO_UUID


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def parts(n: int, topic: str = "t") -> dict[Any, CachedPartition]:
    return {(topic, i): CachedPartition(topic, uuid.UUID(int=0), i, 0, 100, -1, -1, -1)
            for i in range(n)}


def test_next_epoch_wraps_to_one() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(-1) == -1


def test_full_cache_refuses_a_consumer_while_sessions_are_young() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, clock_ms=clock)
    a = cache.maybe_create(False, False, parts(1))
    b = cache.maybe_create(False, False, parts(1))
    assert a and b
    assert cache.maybe_create(False, False, parts(50)) == INVALID_SESSION_ID
    assert set(cache.sessions) == {a, b}


def test_stale_session_is_evicted_first() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, clock_ms=clock)
    cache.maybe_create(False, False, parts(100))  # the oldest: unused longest
    clock.ms += 1000
    fresh = cache.maybe_create(False, False, parts(1))
    clock.ms += EVICTION_MS  # `old` unused for EVICTION_MS + 1 s, `fresh` for EVICTION_MS
    cache.touch(cache.sessions[fresh], clock.ms)
    new = cache.maybe_create(False, False, parts(1))
    assert new != INVALID_SESSION_ID
    assert set(cache.sessions) == {fresh, new}
    assert cache.evictions == 1


def test_bigger_session_evicts_the_smallest_old_enough_one() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, clock_ms=clock)
    small = cache.maybe_create(False, False, parts(2))
    large = cache.maybe_create(False, False, parts(10))
    clock.ms += EVICTION_MS + 1
    for sid in (small, large):  # both in use: none is stale
        cache.touch(cache.sessions[sid], clock.ms)
    assert cache.maybe_create(False, False, parts(1)) == INVALID_SESSION_ID  # smaller
    newcomer = cache.maybe_create(False, False, parts(5))
    assert newcomer != INVALID_SESSION_ID
    assert set(cache.sessions) == {large, newcomer}


def test_follower_evicts_a_young_consumer_session_but_not_a_young_follower() -> None:
    clock = Clock()
    cache = FetchSessionCache(1, clock_ms=clock)
    consumer = cache.maybe_create(False, False, parts(500))
    follower = cache.maybe_create(True, False, parts(1))
    assert follower != INVALID_SESSION_ID
    assert set(cache.sessions) == {follower}
    assert cache.maybe_create(True, False, parts(10)) == INVALID_SESSION_ID
    assert cache.maybe_create(False, False, parts(10)) == INVALID_SESSION_ID
    assert consumer not in cache.sessions


def test_sweep_frees_dead_sessions() -> None:
    clock = Clock()
    cache = FetchSessionCache(10, clock_ms=clock)
    dead = cache.maybe_create(False, False, parts(3))
    clock.ms += 5000
    alive = cache.maybe_create(False, False, parts(3))
    clock.ms += EVICTION_MS - 1000
    cache.sweep()
    assert set(cache.sessions) == {alive}
    assert dead not in cache.sessions


def answer(topic: str, index: int, hw: int, records: bytes = b"", error: int = 0
           ) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "high_watermark": hw,
            "last_stable_offset": hw, "log_start_offset": 0, "preferred_read_replica": -1,
            "records": records}


def request(session_id: int, epoch: int, partitions: list[tuple[int, int]]) -> dict[str, Any]:
    return {"session_id": session_id, "session_epoch": epoch, "forgotten_topics_data": [],
            "topics": [{"topic": "t", "partitions": [
                {"partition": p, "fetch_offset": o, "partition_max_bytes": 100}
                for p, o in partitions]}] if partitions else []}


def test_incremental_answer_keeps_changed_partitions_and_rotates_them() -> None:
    cache = FetchSessionCache(10, clock_ms=Clock())
    full = new_context(cache, 12, request(0, 0, [(0, 0), (1, 0), (2, 0)]), False, lambda _: None)
    sid, _ = full.respond([{"topic": "t", "partitions": [answer("t", i, 0) for i in range(3)]}],
                          [])
    assert sid != INVALID_SESSION_ID

    inc = new_context(cache, 12, request(sid, 1, []), False, lambda _: None)
    topics, unknown, _ = inc.topics()
    assert [p["partition"] for p in topics[0]["partitions"]] == [0, 1, 2]
    sid2, answers = inc.respond([{"topic": "t", "partitions": [
        answer("t", 0, 0), answer("t", 1, 1, b"rec"), answer("t", 2, 0, error=6)]}], unknown)
    assert sid2 == sid
    assert [p["partition_index"] for p in answers[0]["partitions"]] == [1, 2]
    # those that answered go to the end of the fetch order
    after = new_context(cache, 12, request(sid, 2, []), False, lambda _: None)
    assert [p["partition"] for t in after.topics()[0] for p in t["partitions"]] == [0, 1, 2]
    # after the error, partition 2 answers again even with nothing new (its hw was reset)
    _, answers = after.respond([{"topic": "t", "partitions": [
        answer("t", 0, 0), answer("t", 1, 1), answer("t", 2, 0)]}], [])
    assert [p["partition_index"] for t in answers for p in t["partitions"]] == [2]


def test_errors_of_an_incremental_request() -> None:
    cache = FetchSessionCache(10, clock_ms=Clock())
    assert new_context(cache, 12, request(99, 1, []), False, lambda _: None).error == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    full = new_context(cache, 12, request(0, 0, [(0, 0)]), False, lambda _: None)
    sid, _ = full.respond([{"topic": "t", "partitions": [answer("t", 0, 0)]}], [])
    assert new_context(cache, 12, request(sid, 3, []), False, lambda _: None).error == \
        ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # a session begun with names cannot go on with topic ids
    body = request(sid, 1, []) | {"topics": []}
    assert new_context(cache, 13, body, False, lambda _: None).error == \
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_a_session_partition_gives_the_same_fields_until_asked_otherwise() -> None:
    """A follower's session is read on every fetch round trip: a partition whose ask did
    not change gives the same fields dict (issue 26), a changed one new fields."""
    cached = _cached("t", ZERO_UUID, {"partition": 0, "fetch_offset": 5,
                                      "partition_max_bytes": 100, "current_leader_epoch": 3})
    first = cached.request()
    assert cached.request() is first
    assert first["fetch_offset"] == 5 and first["current_leader_epoch"] == 3
    cached.update_request({"partition": 0, "fetch_offset": 9, "partition_max_bytes": 100,
                           "current_leader_epoch": 3})
    moved = cached.request()
    assert moved is not first and moved["fetch_offset"] == 9
    assert first["fetch_offset"] == 5  # a dict given out is never changed


def test_the_follower_side_compares_only_what_changed() -> None:
    """FetchSessionHandler.build with `changed`: an incremental fetch names the changed
    keys whose fields differ from what the leader holds; a fetch the leader did not take
    (a top-level error, no answer handled) is named again at the next build."""
    from pybroker.fetch.handler import FetchSessionHandler

    handler = FetchSessionHandler()
    wanted = {("t", i): {"partition": i, "fetch_offset": 5} for i in range(4)}
    assert len(handler.build(wanted, None)["topics"][0]["partitions"]) == 4
    assert handler.handle_response({"error_code": 0, "session_id": 9})
    wanted[("t", 1)] = {"partition": 1, "fetch_offset": 6}
    wanted[("t", 2)] = {"partition": 2, "fetch_offset": 7}  # not said to have changed
    fetch = handler.build(wanted, [("t", 1), ("t", 3)])
    assert fetch["topics"] == [{"topic": "t", "partitions": [wanted[("t", 1)]]}]
    # not taken (say, a throttled answer with an error): named again
    assert handler.handle_response({"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR)})
    fetch = handler.build(wanted, [])
    assert fetch["topics"] == [{"topic": "t", "partitions": [wanted[("t", 1)]]}]
    assert fetch["session_epoch"] == 1
    assert handler.handle_response({"error_code": 0, "session_id": 9})
    del wanted[("t", 3)]
    fetch = handler.build(wanted, [("t", 3)])
    assert fetch["topics"] == [] and fetch["forgotten_topics_data"] == [
        {"topic": "t", "partitions": [3]}]
    assert handler.handle_response({"error_code": 0, "session_id": 9})
    assert handler.sent == {k: v for k, v in wanted.items() if k != ("t", 2)} | {
        ("t", 2): {"partition": 2, "fetch_offset": 5}}
