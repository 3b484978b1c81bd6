"""The group state machine with a fake clock and an in-memory store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from pybroker.errors import ErrorCode
from pybroker.group.coordinator import GroupConfig, GroupCoordinator
from pybroker.group.offsets import MemoryStore
from pybroker.group.state import GroupState

PROTOCOLS = [("range", b"r"), ("roundrobin", b"rr")]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make(delay_ms: int = 0, store: MemoryStore | None = None,
         clock: Clock | None = None) -> tuple[GroupCoordinator, Clock, MemoryStore]:
    clock = clock or Clock()
    store = store or MemoryStore()
    coordinator = GroupCoordinator(
        GroupConfig(initial_rebalance_delay_ms=delay_ms, min_session_timeout_ms=1000,
                    offsets_retention_ms=60000),
        store, lambda topic, partition: topic == "t" and 0 <= partition < 4,
        clock=clock, wall=lambda: int(clock.now))
    return coordinator, clock, store


def join_kw(member_id: str = "", instance: str | None = None,
            protocols: list[tuple[str, bytes]] | None = None, session: int = 10000,
            rebalance: int = 20000) -> dict[str, Any]:
    return {"group_id": "g", "member_id": member_id, "group_instance_id": instance,
            "protocol_type": "consumer", "protocols": protocols or PROTOCOLS,
            "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "client_id": "c", "client_host": "/h", "version": 3}


def run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main)


async def settle() -> None:
    for _ in range(5):
        await anyio.sleep(0)


def test_single_member_forms_group_and_syncs() -> None:
    async def main() -> None:
        co, _, store = make()
        joined = await co.join_group(**join_kw())
        assert joined["error_code"] == 0 and joined["generation_id"] == 1
        assert joined["protocol_name"] == "range"
        me = joined["member_id"]
        assert joined["leader"] == me and [m["member_id"] for m in joined["members"]] == [me]
        assert co.groups["g"].state is GroupState.COMPLETING_REBALANCE
        synced = await co.sync_group("g", 1, me, None, [(me, b"A")])
        assert synced == {"throttle_time_ms": 0, "error_code": 0, "assignment": b"A"}
        assert co.groups["g"].state is GroupState.STABLE
        assert store.records, "group metadata is persisted on sync"
        assert co.heartbeat("g", 1, me, None) is ErrorCode.NONE
    run(main)


def test_second_member_triggers_rebalance_and_both_get_generation_two() -> None:
    async def main() -> None:
        co, _, _ = make()
        first = await co.join_group(**join_kw())
        a = first["member_id"]
        await co.sync_group("g", 1, a, None, [(a, b"A")])
        results: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            async def second() -> None:
                results["b"] = await co.join_group(**join_kw())
            tg.start_soon(second)
            await settle()
            assert co.groups["g"].state is GroupState.PREPARING_REBALANCE
            assert co.heartbeat("g", 1, a, None) is ErrorCode.REBALANCE_IN_PROGRESS
            results["a"] = await co.join_group(**join_kw(member_id=a))
        assert results["a"]["generation_id"] == results["b"]["generation_id"] == 2
        assert results["a"]["leader"] == a and len(results["a"]["members"]) == 2
        assert results["b"]["members"] == []
    run(main)


def test_protocol_vote_picks_the_common_preference() -> None:
    async def main() -> None:
        co, clock, _ = make(delay_ms=100)
        out: list[dict[str, Any]] = []
        async with anyio.create_task_group() as tg:
            async def member(protocols: list[tuple[str, bytes]]) -> None:
                out.append(await co.join_group(**join_kw(protocols=protocols)))
            tg.start_soon(member, [("roundrobin", b""), ("range", b"")])
            tg.start_soon(member, [("roundrobin", b""), ("sticky", b"")])
            tg.start_soon(member, [("range", b""), ("roundrobin", b"")])
            await settle()
            for _ in range(3):  # the delay, then one more since members kept arriving
                clock.now += 100
                co.tick()
        assert {r["protocol_name"] for r in out} == {"roundrobin"}
        assert {r["generation_id"] for r in out} == {1}
    run(main)


def test_silent_member_expires_after_session_timeout() -> None:
    async def main() -> None:
        co, clock, _ = make()
        a = (await co.join_group(**join_kw(session=5000)))["member_id"]
        await co.sync_group("g", 1, a, None, [(a, b"")])
        clock.now += 4999
        co.tick()
        assert a in co.groups["g"].members
        clock.now += 1
        co.tick()
        group = co.groups["g"]
        assert not group.members and group.state is GroupState.EMPTY
        assert group.generation == 2
    run(main)


def test_member_not_rejoining_within_rebalance_timeout_is_dropped() -> None:
    async def main() -> None:
        co, clock, _ = make()
        a = (await co.join_group(**join_kw(session=60000, rebalance=5000)))["member_id"]
        await co.sync_group("g", 1, a, None, [(a, b"")])
        out: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            async def newcomer() -> None:
                out["b"] = await co.join_group(**join_kw(session=60000, rebalance=5000))
            tg.start_soon(newcomer)
            await settle()
            clock.now += 5000
            co.tick()
        assert out["b"]["error_code"] == 0 and out["b"]["generation_id"] == 2
        assert list(co.groups["g"].members) == [out["b"]["member_id"]]
        assert co.heartbeat("g", 2, a, None) is ErrorCode.UNKNOWN_MEMBER_ID
    run(main)


def test_initial_delay_waits_and_extends_for_new_members() -> None:
    async def main() -> None:
        co, clock, _ = make(delay_ms=3000)
        out: list[dict[str, Any]] = []
        async with anyio.create_task_group() as tg:
            async def member() -> None:
                out.append(await co.join_group(**join_kw()))
            tg.start_soon(member)
            await settle()
            clock.now += 2000
            co.tick()
            tg.start_soon(member)
            await settle()
            clock.now += 1000  # first delay over, a member arrived: wait once more
            co.tick()
            await settle()
            assert not out
            clock.now += 3000
            co.tick()
        assert len(out) == 2 and {r["generation_id"] for r in out} == {1}
    run(main)


def test_static_member_rejoin_keeps_assignment_without_rebalance() -> None:
    async def main() -> None:
        co, _, store = make()
        out: dict[str, Any] = {}
        a = (await co.join_group(**join_kw(instance="ia")))["member_id"]
        await co.sync_group("g", 1, a, "ia", [(a, b"A")])
        async with anyio.create_task_group() as tg:
            async def b_joins() -> None:
                out["b"] = await co.join_group(**join_kw(instance="ib"))
            tg.start_soon(b_joins)
            await settle()
            out["a"] = await co.join_group(**join_kw(member_id=a, instance="ia"))
        b = out["b"]["member_id"]
        async with anyio.create_task_group() as tg:
            async def b_syncs() -> None:
                out["bs"] = await co.sync_group("g", 2, b, "ib", [])
            tg.start_soon(b_syncs)
            await settle()
            await co.sync_group("g", 2, a, "ia", [(a, b"A2"), (b, b"B2")])
        assert out["bs"]["assignment"] == b"B2"
        writes = len(store.records)
        rejoined = await co.join_group(**join_kw(instance="ib"))
        group = co.groups["g"]
        assert rejoined["error_code"] == 0 and rejoined["generation_id"] == 2
        new_b = rejoined["member_id"]
        assert new_b != b and group.state is GroupState.STABLE
        assert (await co.sync_group("g", 2, new_b, "ib", []))["assignment"] == b"B2"
        assert co.heartbeat("g", 2, b, "ib") is ErrorCode.FENCED_INSTANCE_ID
        assert co.heartbeat("g", 2, a, "ia") is ErrorCode.NONE
        assert len(store.records) == writes + 1  # the new member id is persisted
    run(main)


def test_member_id_required_then_join() -> None:
    async def main() -> None:
        co, clock, _ = make()
        kw = join_kw()
        kw["version"] = 4
        first = await co.join_group(**kw)
        assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
        kw["member_id"] = first["member_id"]
        second = await co.join_group(**kw)
        assert second["error_code"] == 0 and second["member_id"] == first["member_id"]
    run(main)


def test_commits_validate_and_load_back() -> None:
    async def main() -> None:
        co, clock, store = make()
        a = (await co.join_group(**join_kw()))["member_id"]
        assert co.commit_offsets("g", 1, a, None, [("t", [(0, 5, -1, "m")])]) == [
            ("t", [(0, ErrorCode.REBALANCE_IN_PROGRESS)])]
        await co.sync_group("g", 1, a, None, [(a, b"A")])
        result = co.commit_offsets("g", 1, a, None, [
            ("t", [(0, 5, 3, "m"), (1, 6, -1, "x" * 5000), (7, 1, -1, None)]),
            ("u", [(0, 1, -1, None)])])
        assert result == [("t", [(0, ErrorCode.NONE), (1, ErrorCode.OFFSET_METADATA_TOO_LARGE),
                                 (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]),
                          ("u", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]
        assert co.commit_offsets("g", 9, a, None, [("t", [(0, 1, -1, None)])]) == [
            ("t", [(0, ErrorCode.ILLEGAL_GENERATION)])]
        assert co.commit_offsets("solo", -1, "", None, [("t", [(2, 8, -1, None)])]) == [
            ("t", [(2, ErrorCode.NONE)])]
        assert co.commit_offsets("new", 3, "x", None, [("t", [(2, 8, -1, None)])]) == [
            ("t", [(2, ErrorCode.ILLEGAL_GENERATION)])]
        # a restarted coordinator rebuilds groups, members and offsets from the store
        again, _, _ = make(store=store, clock=clock)
        again.load()
        loaded = again.groups["g"]
        assert loaded.state is GroupState.STABLE and list(loaded.members) == [a]
        assert loaded.members[a].assignment == b"A" and loaded.generation == 1
        assert again.fetch_offsets("g", [("t", [0, 1])])[0][1][0][1].offset == 5
        assert again.fetch_offsets("g", [("t", [0, 1])])[0][1][1][1] is None
        assert again.fetch_offsets("solo", None)[0][0] == "t"
        assert again.heartbeat("g", 1, a, None) is ErrorCode.NONE
    run(main)


def test_delete_groups_and_offset_expiry() -> None:
    async def main() -> None:
        co, clock, store = make()
        a = (await co.join_group(**join_kw()))["member_id"]
        await co.sync_group("g", 1, a, None, [(a, b"")])
        co.commit_offsets("solo", -1, "", None, [("t", [(0, 1, -1, None)])])
        co.commit_offsets("old", -1, "", None, [("t", [(0, 1, -1, None)])])
        assert dict(co.delete_groups(["g", "solo", "nope", ""])) == {
            "g": ErrorCode.NON_EMPTY_GROUP, "solo": ErrorCode.NONE,
            "nope": ErrorCode.GROUP_ID_NOT_FOUND, "": ErrorCode.INVALID_GROUP_ID}
        assert "solo" not in co.groups
        clock.now += 60000
        assert co.expire_offsets() == 1
        assert "old" not in co.groups and "g" in co.groups
        again, _, _ = make(store=store, clock=clock)
        again.load()
        assert set(again.groups) == {"g"}
    run(main)


def test_a_session_that_just_ended_is_over_for_admin_requests() -> None:
    """A static member closed without leaving (librdkafka's close) is gone as soon as
    its session ends, as Kafka's timer fires on time: DescribeGroups, ListGroups and
    DeleteGroups right then see the group empty, not only after the next tick."""
    async def main() -> None:
        co, clock, _ = make()
        a = (await co.join_group(**join_kw(instance="ia", session=5000)))["member_id"]
        await co.sync_group("g", 1, a, "ia", [(a, b"A")])
        clock.now += 4999
        assert co.delete_groups(["g"]) == [("g", ErrorCode.NON_EMPTY_GROUP)]
        clock.now += 1  # no tick in between
        described = co.describe_group("g")
        assert described is not None and described.state is GroupState.EMPTY
        assert [g.group_id for g in co.list_groups()] == ["g"]
        assert co.delete_groups(["g"]) == [("g", ErrorCode.NONE)]
    run(main)


@pytest.mark.parametrize("state", ["Stable", "CompletingRebalance"])
def test_leave_triggers_rebalance(state: str) -> None:
    async def main() -> None:
        co, _, _ = make()
        a = (await co.join_group(**join_kw()))["member_id"]
        if state == "Stable":
            await co.sync_group("g", 1, a, None, [(a, b"")])
        top, codes = co.leave_group("g", [(a, None), ("ghost", None)])
        assert top is ErrorCode.NONE
        assert codes == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
        assert co.groups["g"].state is GroupState.EMPTY
    run(main)


def test_a_group_with_an_unreadable_record_is_refused_not_served_from_the_rest() -> None:
    """An offset commit the coordinator cannot read at load would leave an older
    committed offset in force, or none (the consumer resets, maybe to the end): the
    group is refused (COORDINATOR_LOAD_IN_PROGRESS) until a readable record of the same
    key replaces it; other groups are served. An unreadable key refuses every group."""
    from pybroker.group import records as rec

    async def main() -> None:
        co, clock, store = make()
        assert co.commit_offsets("solo", -1, "", None, [("t", [(2, 8, -1, None)])]) == [
            ("t", [(2, ErrorCode.NONE)])]
        assert co.commit_offsets("other", -1, "", None, [("t", [(1, 3, -1, None)])]) == [
            ("t", [(1, ErrorCode.NONE)])]
        [i] = [i for i, (k, _) in enumerate(store.records)
               if getattr(rec.decode_key(k), "group", None) == "solo"]
        key, value = store.records[i]
        assert value is not None
        store.records[i] = (key, value[:4])  # cut short
        again, _, _ = make(store=store, clock=clock)
        again.load()
        assert again.coordinator_error("solo") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert again.commit_offsets("solo", -1, "", None, [("t", [(2, 9, -1, None)])]) == [
            ("t", [(2, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)])]
        assert again.coordinator_error("other") is None
        assert again.fetch_offsets("other", [("t", [1])])[0][1][0][1].offset == 3
        # a later readable commit of the same partition replaces it
        store.records.append((key, rec.offset_value(rec.OffsetValue(10, -1, "", 1, -1))))
        third, _, _ = make(store=store, clock=clock)
        third.load()
        assert third.coordinator_error("solo") is None
        assert third.fetch_offsets("solo", [("t", [2])])[0][1][0][1].offset == 10
        # a key that cannot be read: whose group it is cannot be told
        store.records.append((b"\x00\x01\x00\x09ab", None))
        fourth, _, _ = make(store=store, clock=clock)
        fourth.load()
        assert fourth.coordinator_error("other") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    run(main)
