"""Regex subscriptions of KIP-848 consumer groups, resolved as Kafka 4 does: off the
heartbeat (literal topics first, the regex's later), kept as group state in
ConsumerGroupRegularExpression records, refreshed when topics are created (at most
once in 10 s) or the refresh interval passed, and kept across a reload."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from pybroker.errors import ErrorCode
from pybroker.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from pybroker.group.consumer import records as crec
from pybroker.group.consumer.regexes import MIN_REFRESH_INTERVAL_MS, ManualExecutor
from pybroker.group.consumer.topics import StaticTopics
from pybroker.group.coordinator import GroupConfig, GroupCoordinator
from pybroker.group.offsets import MemoryStore

Pair = tuple[str, int]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Setup:
    def __init__(self, store: MemoryStore | None = None, topics: StaticTopics | None = None,
                 clock: Clock | None = None, **config: Any) -> None:
        self.clock = clock or Clock()
        self.store = store or MemoryStore()
        self.topics = topics or StaticTopics({"orders-eu": 2, "orders-us": 1, "t": 2,
                                              "__consumer_offsets": 3})
        self.co = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0,
                                               min_session_timeout_ms=1000),
                                   self.store, lambda topic, p: topic in self.topics.table,
                                   clock=self.clock, wall=lambda: int(self.clock.now))
        self.co.consumer = ConsumerGroupCoordinator(self.co, ConsumerGroupConfig(**config),
                                                    self.topics)
        self.executor = ManualExecutor()
        self.co.consumer.executor = self.executor
        self.co.load()

    def name(self, topic_id: uuid.UUID) -> str:
        return next(n for n, (i, _) in self.topics.table.items() if i == topic_id)

    def hb(self, member: str, epoch: int, *, topics: list[str] | None = None,
           regex: str | None = None, owned: set[Pair] | None = None,
           group: str = "g", describable: Callable[[str], bool] | None = None
           ) -> dict[str, Any]:
        joining = epoch == 0
        body = {"group_id": group, "member_id": member, "member_epoch": epoch,
                "instance_id": None, "rack_id": None,
                "rebalance_timeout_ms": 30000 if joining else -1,
                "subscribed_topic_names": topics if topics is not None
                else ([] if joining else None),
                "subscribed_topic_regex": regex, "server_assignor": None,
                "topic_partitions": [] if joining else (
                    None if owned is None else
                    [{"topic_id": self.topics.table[t][0],
                      "partitions": sorted(p for n, p in owned if n == t)}
                     for t in sorted({n for n, _ in owned})])}
        return self.co.consumer.heartbeat(body, 1, "client", "/127.0.0.1", describable)

    def got(self, response: dict[str, Any]) -> set[Pair]:
        assert response["error_code"] == 0, response
        assignment = response["assignment"] or {"topic_partitions": []}
        return {(self.name(tp["topic_id"]), p) for tp in assignment["topic_partitions"]
                for p in tp["partitions"]}

    def regex_records(self, group: str = "g") -> list[tuple[str, bytes | None]]:
        out = []
        for key, value in self.store.load(None):
            k = crec.decode_key(key)
            if k is not None and k.type == crec.REGULAR_EXPRESSION and k.group == group:
                out.append((k.member or "", value))
        return out


ORDERS = {("orders-eu", 0), ("orders-eu", 1), ("orders-us", 0)}


def test_literal_topics_are_assigned_at_once_and_the_regexs_after_its_resolution() -> None:
    s = Setup()
    first = s.hb("a", 0, topics=["t"], regex="orders-.*")
    # the heartbeat does not wait for the regex: the literal topic only, at epoch 1
    assert first["member_epoch"] == 1 and s.got(first) == {("t", 0), ("t", 1)}
    assert list(s.executor.pending) == ["g"]
    assert s.executor.run_all() == 1
    group = s.co.consumer.group("g")
    assert group is not None and group.group_epoch == 2
    assert group.resolved_regexes["orders-.*"].topics == {"orders-eu", "orders-us"}
    # the next heartbeat gets the regex's topics at the bumped epoch
    second = s.hb("a", 1, owned={("t", 0), ("t", 1)})
    assert second["member_epoch"] == 2 and s.got(second) == ORDERS | {("t", 0), ("t", 1)}
    [(regex, value)] = s.regex_records()
    assert regex == "orders-.*" and value is not None
    stored = crec.decode_regex_value(value)
    assert stored.topics == {"orders-eu", "orders-us"} and stored.timestamp_ms == 1_000_000


def test_internal_topics_match_as_in_kafka_and_non_re2_patterns_are_refused() -> None:
    s = Setup()
    s.hb("a", 0, regex="__.*")
    s.executor.run_all()
    group = s.co.consumer.group("g")
    assert group is not None
    assert group.resolved_regexes["__.*"].topics == {"__consumer_offsets"}
    assert s.got(s.hb("a", 1, owned=set())) == {("__consumer_offsets", p) for p in range(3)}
    for bad in ("(", "orders(?=-eu)", r"(o)\1.*", "orders-.*+", "[[:alpha:]]+"):
        assert s.hb("b", 0, regex=bad)["error_code"] == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_a_created_topic_is_matched_by_the_next_heartbeat_after_the_min_interval() -> None:
    s = Setup()
    s.hb("a", 0, regex="orders-.*")
    s.executor.run_all()
    owned = s.got(s.hb("a", 1, owned=set()))
    assert owned == ORDERS
    s.topics.add("orders-asia", 1)
    s.clock.now += MIN_REFRESH_INTERVAL_MS / 2
    assert s.hb("a", 2, owned=owned)["assignment"] is None
    assert not s.executor.pending  # resolved too recently: nothing scheduled
    s.clock.now += MIN_REFRESH_INTERVAL_MS / 2 + 1
    assert s.hb("a", 2, owned=owned)["assignment"] is None
    assert s.executor.run_all() == 1
    third = s.hb("a", 2, owned=owned)
    assert third["member_epoch"] == 3 and s.got(third) == ORDERS | {("orders-asia", 0)}
    # nothing new: later heartbeats schedule nothing until the refresh interval
    s.clock.now += 2 * MIN_REFRESH_INTERVAL_MS
    s.hb("a", 3, owned=s.got(third))
    assert not s.executor.pending


def test_the_refresh_interval_resolves_again_without_new_topics() -> None:
    s = Setup(regex_refresh_interval_ms=60_000)
    s.hb("a", 0, regex="orders-.*")
    s.executor.run_all()
    owned = s.got(s.hb("a", 1, owned=set()))
    s.clock.now += 30_000
    s.hb("a", 2, owned=owned)
    assert not s.executor.pending
    s.clock.now += 31_000
    s.hb("a", 2, owned=owned)
    assert s.executor.run_all() == 1
    group = s.co.consumer.group("g")
    # the same topics: the resolution is recorded again (newer timestamp), no rebalance
    assert group is not None and group.group_epoch == 2
    assert group.resolved_regexes["orders-.*"].timestamp_ms == 1_061_000


def test_resubscribing_to_another_regex_drops_the_old_resolution() -> None:
    s = Setup()
    s.hb("a", 0, regex="orders-.*")
    s.executor.run_all()
    owned = s.got(s.hb("a", 1, owned=set()))
    moved = s.hb("a", 2, regex="t", owned=owned)
    group = s.co.consumer.group("g")
    assert group is not None and "orders-.*" not in group.resolved_regexes
    assert s.regex_records()[-1] == ("orders-.*", None)  # its tombstone
    # the old topics are revoked at once; the new regex's come after its resolution
    assert s.got(moved) == set() and moved["member_epoch"] == 2
    assert s.executor.run_all() == 1
    now_t = s.hb("a", 2, owned=set())
    assert s.got(now_t) == {("t", 0), ("t", 1)} and now_t["member_epoch"] == 4


def test_a_regex_shared_by_members_stays_until_its_last_member_leaves() -> None:
    s = Setup()
    s.hb("a", 0, regex="orders-.*")
    s.executor.run_all()
    s.hb("b", 0, regex="orders-.*")  # already resolved: no new resolution
    assert not s.executor.pending
    s.hb("a", -1)
    group = s.co.consumer.group("g")
    assert group is not None and "orders-.*" in group.resolved_regexes
    s.hb("b", -1)
    assert "orders-.*" not in group.resolved_regexes
    assert s.regex_records()[-1] == ("orders-.*", None)


def test_resolved_regexes_survive_a_reload_and_are_checked_again() -> None:
    s = Setup()
    s.hb("a", 0, topics=["t"], regex="orders-.*")
    s.executor.run_all()
    owned = s.got(s.hb("a", 1, owned={("t", 0), ("t", 1)}))
    before = s.co.consumer.group("g")
    assert before is not None
    again = Setup(store=s.store, topics=s.topics, clock=s.clock)
    group = again.co.consumer.group("g")
    assert group is not None
    assert group.resolved_regexes == before.resolved_regexes
    assert group.group_epoch == before.group_epoch == 2
    # the member carries on with its partitions, nothing moves
    assert again.hb("a", 2, owned=owned)["error_code"] == 0
    # a new coordinator takes every topic as new: past the min interval, the regex is
    # resolved again; the same topics do not rebalance
    s.clock.now += MIN_REFRESH_INTERVAL_MS + 1
    again.hb("a", 2, owned=owned)
    assert again.executor.run_all() == 1
    assert group.group_epoch == 2 and group.members["a"].assigned == before.members["a"].assigned


def test_deleting_the_group_tombstones_its_regexes() -> None:
    s = Setup()
    s.hb("a", 0, regex="orders-.*")
    s.executor.run_all()
    holder = s.co.groups["g"]
    assert ((crec.key(crec.REGULAR_EXPRESSION, "g", "orders-.*"), None)
            in s.co.consumer.tombstones(holder))


def test_a_resolution_for_a_group_that_went_away_is_dropped() -> None:
    s = Setup()
    s.hb("a", 0, regex="orders-.*")
    s.hb("a", -1)
    assert s.executor.run_all() == 1
    group = s.co.consumer.group("g")
    assert group is not None and group.resolved_regexes == {} and s.regex_records() == []


def test_a_resolution_drops_a_regex_no_member_uses() -> None:
    s = Setup()
    s.hb("a", 0, regex="orders-.*")
    s.executor.run_all()
    assert s.got(s.hb("a", 1, owned=set())) == ORDERS
    group = s.co.consumer.group("g")
    assert group is not None
    # as if the tombstone of an old regex had not been written
    group.resolved_regexes["gone-.*"] = crec.ResolvedRegex(frozenset(), 0, 0)
    s.clock.now += MIN_REFRESH_INTERVAL_MS + 1
    s.hb("a", 2, owned=ORDERS)
    assert s.executor.run_all() == 1
    assert set(group.resolved_regexes) == {"orders-.*"}
    assert ("gone-.*", None) in s.regex_records()
    s.clock.now += MIN_REFRESH_INTERVAL_MS + 1
    s.hb("a", 2, owned=ORDERS)
    assert not s.executor.pending  # nothing left to resolve


def test_a_regex_matches_only_topics_the_member_may_describe() -> None:
    """Kafka filters a resolution by DESCRIBE on each topic for the principal of the
    heartbeat that asked for it; an authorization that fails is a refusal."""
    s = Setup()

    def describable(topic: str) -> bool:
        if topic == "t":
            raise RuntimeError("authorizer down")
        return topic != "orders-us"

    s.hb("a", 0, regex="orders-.*|t", describable=describable)
    s.executor.run_all()
    group = s.co.consumer.group("g")
    assert group is not None and group.resolved_regexes["orders-.*|t"].topics == {"orders-eu"}
    assert s.got(s.hb("a", 1, owned=set())) == {("orders-eu", 0), ("orders-eu", 1)}
