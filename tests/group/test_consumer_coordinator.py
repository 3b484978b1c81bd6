"""The KIP-848 consumer group state machine (ConsumerGroupHeartbeat) with a fake
clock and an in-memory store: epochs, revocation before reassignment, static
members, expiry, offsets checks, reload from the records."""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.errors import ErrorCode
from pybroker.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from pybroker.group.consumer.topics import StaticTopics
from pybroker.group.coordinator import GroupConfig, GroupCoordinator
from pybroker.group.offsets import MemoryStore

TOPICS = StaticTopics({"t": 4, "u": 2, "orders-eu": 1, "orders-us": 1, "__consumer_offsets": 3})
T = TOPICS.table["t"][0]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make(store: MemoryStore | None = None, clock: Clock | None = None,
         **config: Any) -> tuple[GroupCoordinator, Clock, MemoryStore]:
    clock = clock or Clock()
    store = store or MemoryStore()
    co = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1000),
                          store, lambda topic, p: topic in TOPICS.table, clock=clock,
                          wall=lambda: int(clock.now))
    co.consumer = ConsumerGroupCoordinator(co, ConsumerGroupConfig(**config), TOPICS)
    co.load()
    return co, clock, store


def hb(co: GroupCoordinator, member: str, epoch: int, *, topics: list[str] | None = None,
       regex: str | None = None, owned: set[int] | None = None, instance: str | None = None,
       assignor: str | None = None, group: str = "g", version: int = 1) -> dict[str, Any]:
    body = {"group_id": group, "member_id": member, "member_epoch": epoch,
            "instance_id": instance, "rack_id": None,
            "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
            "subscribed_topic_names": topics if topics is not None or regex is not None
            else (["t"] if epoch == 0 else None),
            "subscribed_topic_regex": regex, "server_assignor": assignor,
            "topic_partitions": [] if epoch == 0 else (
                None if owned is None else [{"topic_id": T, "partitions": sorted(owned)}])}
    return co.consumer.heartbeat(body, version, "client", "/127.0.0.1")


def parts(response: dict[str, Any], topic: uuid.UUID = T) -> set[int]:
    assert response["error_code"] == 0, response
    assignment = response["assignment"] or {"topic_partitions": []}  # None: unchanged
    return {p for tp in assignment["topic_partitions"] if tp["topic_id"] == topic
            for p in tp["partitions"]}


def test_first_member_gets_everything_at_epoch_1() -> None:
    co, _, _ = make()
    r = hb(co, "a", 0)
    assert r["error_code"] == 0 and r["member_id"] == "a" and r["member_epoch"] == 1
    assert parts(r) == {0, 1, 2, 3}
    assert r["heartbeat_interval_ms"] == 5000


def test_second_member_waits_for_revocation_before_owning() -> None:
    co, _, _ = make()
    hb(co, "a", 0)
    b = hb(co, "b", 0)
    # b is at the new epoch but owns nothing yet: a still holds its partitions
    assert b["member_epoch"] == 2 and parts(b) == set()
    a = hb(co, "a", 1, owned={0, 1, 2, 3})
    kept = parts(a)
    assert len(kept) == 2 and a["member_epoch"] == 1  # a must first revoke two
    assert co.describe_group("g") is None  # DescribeGroups: a consumer group is "Dead"
    b = hb(co, "b", 2, owned=set())
    assert b["assignment"] is None or parts(b) == set()  # not released yet
    a = hb(co, "a", 1, owned=kept)  # the acknowledgement
    assert a["member_epoch"] == 2
    b = hb(co, "b", 2, owned=set())
    assert parts(b) == {0, 1, 2, 3} - kept
    assert co.consumer.group("g").state == "Stable"


def test_stale_previous_epoch_accepted_then_fenced() -> None:
    co, _, _ = make()
    hb(co, "a", 0)
    hb(co, "b", 0)
    kept = parts(hb(co, "a", 1, owned={0, 1, 2, 3}))
    hb(co, "a", 1, owned=kept)  # a now at epoch 2; the answer may have been lost
    assert hb(co, "a", 1, owned=kept)["error_code"] == 0
    assert hb(co, "a", 1, owned={0, 1, 2, 3})["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert hb(co, "a", 7)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert hb(co, "zz", 1)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_frees_partitions_for_the_others() -> None:
    co, _, _ = make()
    hb(co, "a", 0)
    hb(co, "b", 0)
    kept = parts(hb(co, "a", 1, owned={0, 1, 2, 3}))
    hb(co, "a", 1, owned=kept)
    b_parts = parts(hb(co, "b", 2, owned=set()))
    left = hb(co, "a", -1)
    assert left["error_code"] == 0 and left["member_epoch"] == -1
    b = hb(co, "b", 2, owned=b_parts)
    assert parts(b) == {0, 1, 2, 3} and b["member_epoch"] == 3


def test_left_member_is_unknown_until_it_joins_again() -> None:
    """librdkafka's unsubscribe-then-subscribe (its 0045_subscribe_many_updates): a
    heartbeat in flight is answered before the leave, the leave with epoch -1; what the
    left member sends after that is Kafka's consumerGroupHeartbeat/consumerGroupLeave
    for a member the group no longer has (UNKNOWN_MEMBER_ID, on which the client
    rejoins), and its join at epoch 0 with the same member id starts it over."""
    co, _, _ = make()
    a = hb(co, "a", 0)
    assert a["member_epoch"] == 1
    in_flight = hb(co, "a", 1, owned={0, 1, 2, 3})
    assert in_flight["error_code"] == 0 and in_flight["member_epoch"] == 1
    left = hb(co, "a", -1)
    assert (left["error_code"], left["member_id"], left["member_epoch"]) == (0, "a", -1)
    assert left["assignment"] is None
    assert co.consumer.group("g").members == {}
    assert hb(co, "a", 1, owned={0, 1, 2, 3})["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert hb(co, "a", -1)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    back = hb(co, "a", 0, topics=["u"])
    assert back["error_code"] == 0 and back["member_id"] == "a"
    assert back["member_epoch"] > 1  # the leave and the join each moved the group epoch
    assert parts(back, TOPICS.table["u"][0]) == {0, 1}


def test_session_expiry_removes_member() -> None:
    co, clock, _ = make(session_timeout_ms=1000)
    hb(co, "a", 0)
    hb(co, "b", 0)
    clock.now += 600
    hb(co, "b", 2, owned=set())
    clock.now += 600
    co.tick()
    assert set(co.consumer.group("g").members) == {"b"}
    assert parts(hb(co, "b", 2, owned=set())) == {0, 1, 2, 3}


def test_static_member_leaves_with_minus_2_and_rejoins_with_its_assignment() -> None:
    co, _, _ = make()
    hb(co, "s1", 0, instance="i1")
    r = hb(co, "s1", -2, instance="i1")
    assert r["error_code"] == 0 and r["member_epoch"] == -2
    # nobody else gets its partitions meanwhile
    other = hb(co, "d", 0)
    assert parts(other) == set()
    assert parts(hb(co, "d", 2, owned=set())) == set()
    again = hb(co, "s2", 0, instance="i1")
    # it takes over s1's epoch and partitions, then gives up half to d as usual
    assert again["error_code"] == 0 and again["member_id"] == "s2"
    assert again["member_epoch"] == 1 and len(parts(again)) == 2
    assert "s1" not in co.consumer.group("g").members
    hb(co, "s2", 1, owned=parts(again), instance="i1")
    assert parts(hb(co, "d", 2, owned=set())) == {0, 1, 2, 3} - parts(again)
    # a second live member with the same instance id is refused
    assert hb(co, "s3", 0, instance="i1")["error_code"] == ErrorCode.UNRELEASED_INSTANCE_ID


def test_range_assignor_and_unsupported_assignor() -> None:
    co, _, _ = make()
    assert hb(co, "a", 0, assignor="sticky")["error_code"] == ErrorCode.UNSUPPORTED_ASSIGNOR
    hb(co, "a", 0, assignor="range")
    hb(co, "b", 0, assignor="range")
    target = co.consumer.group("g").target
    assert target["a"] == {T: frozenset({0, 1})} and target["b"] == {T: frozenset({2, 3})}


def test_invalid_requests() -> None:
    co, _, _ = make()
    assert hb(co, "", 0)["error_code"] == ErrorCode.INVALID_REQUEST  # v1: client makes the id
    assert hb(co, "a", 0, group="")["error_code"] == ErrorCode.INVALID_REQUEST
    assert hb(co, "a", 3, group="nope")["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    r = hb(co, "", 0, version=0)  # v0: the coordinator makes the id
    assert r["error_code"] == 0 and r["member_id"]


def test_offset_commit_checks_member_epoch() -> None:
    co, _, _ = make()
    hb(co, "a", 0)
    ok = co.commit_offsets("g", 1, "a", None, [("t", [(0, 5, -1, None)])])
    assert ok == [("t", [(0, ErrorCode.NONE)])]
    stale = co.commit_offsets("g", 0, "a", None, [("t", [(0, 6, -1, None)])])
    assert stale == [("t", [(0, ErrorCode.STALE_MEMBER_EPOCH)])]
    unknown = co.commit_offsets("g", 1, "x", None, [("t", [(0, 6, -1, None)])])
    assert unknown == [("t", [(0, ErrorCode.UNKNOWN_MEMBER_ID)])]
    assert co.consumer.fetch_error("g", "a", 0) == ErrorCode.STALE_MEMBER_EPOCH
    assert co.consumer.fetch_error("g", "x", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert co.consumer.fetch_error("g", None, -1) is None
    assert co.consumer.fetch_error("g", "a", 1) is None


def test_classic_and_consumer_groups_coexist_by_kafkas_rules() -> None:
    import anyio

    co, _, _ = make()
    hb(co, "a", 0)

    async def join(group: str, protocol_type: str = "consumer") -> dict[str, Any]:
        return await co.join_group(group, "", None, protocol_type, [("range", b"")], 10000,
                                   10000, "c", "/h", 3)

    assert anyio.run(join, "g")["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert anyio.run(join, "g", "connect")["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # a live classic group refuses a KIP-848 member
    assert anyio.run(join, "classic")["error_code"] == 0
    assert co.groups["classic"].members
    assert hb(co, "b", 0, group="classic")["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    # an empty consumer group becomes classic on a JoinGroup, keeping its offsets
    co.commit_offsets("g", 1, "a", None, [("t", [(0, 5, -1, None)])])
    hb(co, "a", -1)
    assert anyio.run(join, "g")["error_code"] == 0
    assert co.groups["g"].consumer is None and ("t", 0) in co.groups["g"].offsets


def test_state_is_rebuilt_from_the_records() -> None:
    co, _, store = make()
    hb(co, "a", 0, instance="i1")
    hb(co, "b", 0)
    kept = parts(hb(co, "a", 1, owned={0, 1, 2, 3}, instance="i1"))
    co.commit_offsets("g", 1, "a", None, [("t", [(1, 9, -1, None)])])
    again, _, _ = make(store=store)
    group = again.consumer.group("g")
    assert group is not None and set(group.members) == {"a", "b"}
    assert group.group_epoch == 2 and group.assignment_epoch == 2
    a = group.members["a"]
    assert a.instance_id == "i1" and a.member_epoch == 1
    assert a.assigned == {T: frozenset(kept)} and a.pending_revocation
    assert again.groups["g"].offsets[("t", 1)].offset == 9
    # the reloaded group carries on: the revocation completes
    assert hb(again, "a", 1, owned=kept, instance="i1")["member_epoch"] == 2
    # a deleted group leaves tombstones: nothing comes back
    hb(again, "a", -1)
    hb(again, "b", -1)
    assert again.delete_groups(["g"]) == [("g", ErrorCode.NONE)]
    third, _, _ = make(store=store)
    assert third.consumer.group("g") is None and "g" not in third.groups


def test_empty_classic_group_becomes_a_consumer_group_keeping_offsets() -> None:
    co, _, store = make()
    co.commit_offsets("old", -1, "", None, [("t", [(2, 7, -1, None)])])  # offsets only
    assert co.groups["old"].consumer is None
    r = hb(co, "a", 0, group="old")
    assert r["error_code"] == 0 and co.groups["old"].consumer is not None
    assert co.groups["old"].offsets[("t", 2)].offset == 7
    again, _, _ = make(store=store)
    assert again.consumer.group("old") is not None
    assert again.groups["old"].offsets[("t", 2)].offset == 7


def test_member_that_does_not_revoke_in_time_is_removed() -> None:
    co, clock, _ = make()
    hb(co, "a", 0)  # rebalance timeout 30 s
    hb(co, "b", 0)
    hb(co, "a", 1, owned={0, 1, 2, 3})  # told to revoke two
    clock.now += 20_000
    hb(co, "b", 2, owned=set())  # keeps b's session alive
    hb(co, "a", 1)  # a heartbeats but never acknowledges
    clock.now += 11_000
    co.tick()
    assert set(co.consumer.group("g").members) == {"b"}


def test_offset_delete_refuses_subscribed_topics() -> None:
    co, _, _ = make()
    hb(co, "a", 0)
    co.commit_offsets("g", 1, "a", None, [("t", [(0, 5, -1, None)]), ("u", [(0, 1, -1, None)])])
    code, results = co.delete_offsets("g", [("t", [0]), ("u", [0])])
    assert code == ErrorCode.NONE
    assert results == [("t", [(0, 86)]), ("u", [(0, ErrorCode.NONE)])]  # 86: subscribed


def test_a_consumer_group_with_an_unreadable_record_is_refused() -> None:
    """A member's record the coordinator cannot read at load (its epoch, its
    assignment): the group is refused (COORDINATOR_LOAD_IN_PROGRESS), not rebuilt
    without it; other groups are served."""
    from pybroker.group.consumer import records as crec

    co, _, store = make()
    hb(co, "a", 0)
    hb(co, "x", 0, group="other")
    [i] = [i for i, (k, v) in enumerate(store.records)
           if (key := crec.decode_key(k)) is not None and key.group == "g"
           and key.type == crec.CURRENT_MEMBER_ASSIGNMENT and v is not None]
    key, value = store.records[i]
    assert value is not None
    store.records[i] = (key, value[:3])  # cut short
    again, _, _ = make(store=store)
    assert again.coordinator_error("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert hb(again, "a", 1)["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert again.coordinator_error("other") is None
