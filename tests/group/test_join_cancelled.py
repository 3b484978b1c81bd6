"""A JoinGroup / SyncGroup whose request is cancelled (its client went away while it
waited): nothing keeps waiting, and the member is handled as Kafka handles a member
whose connection dropped (Kafka cannot even see the disconnect: the member stays
until its rebalance completes, then leaves by the sync or session deadline)."""

from __future__ import annotations

from typing import Any

import anyio

from pybroker.group.state import GroupState

from .test_coordinator import join_kw, make, run, settle


def no_waiters(co: Any) -> bool:
    return all(m.join_waiter is None and m.sync_waiter is None
               for g in co.groups.values() for m in g.members.values())


def test_cancelled_join_of_a_new_member_leaves_no_waiter_and_the_member_goes() -> None:
    async def main() -> None:
        co, clock, _ = make(delay_ms=3000)
        async def join() -> None:
            await co.join_group(**join_kw(session=6000, rebalance=10000))

        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(join)
                await settle()
                group = co.groups["g"]
                assert group.state is GroupState.PREPARING_REBALANCE
                assert len(group.members) == 1
                scope.cancel()  # the client went away during the initial delay
        assert scope.cancelled_caught
        # the rebalance completes with the member (its answer goes nowhere) ...
        clock.now += 3000
        co.tick()
        assert group.state is GroupState.COMPLETING_REBALANCE
        assert no_waiters(co)
        # ... which never syncs: removed at the sync deadline, the group empties
        clock.now += 10000
        co.tick()
        assert group.state is GroupState.EMPTY and not group.members
        assert no_waiters(co)
    run(main)


def test_cancelled_rejoin_of_a_known_member_does_not_block_the_others() -> None:
    async def main() -> None:
        co, clock, _ = make()
        kw = {"session": 6000, "rebalance": 10000}
        results: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:  # a and c form generation 1
            async def first(name: str) -> None:
                results[name] = await co.join_group(**join_kw(**kw))
            tg.start_soon(first, "a")
            await settle()
            tg.start_soon(first, "c")
            await settle()
            co.tick()
            await settle()
            if results.keys() != {"a", "c"}:  # a alone formed generation 1: a rejoins
                results["a"] = await co.join_group(**join_kw(results["a"]["member_id"], **kw))
        group = co.groups["g"]
        a, c = results["a"]["member_id"], results["c"]["member_id"]
        await co.sync_group("g", group.generation, results["a"]["leader"], None,
                            [(a, b"A"), (c, b"C")])
        assert group.state is GroupState.STABLE and set(group.members) == {a, c}
        generation = group.generation

        rejoin = anyio.CancelScope()

        async def rejoin_a() -> None:
            with rejoin:
                await co.join_group(**join_kw(member_id=a, **kw))

        async with anyio.create_task_group() as tg:
            async def join(name: str, member_id: str = "") -> None:
                results[name] = await co.join_group(**join_kw(member_id, **kw))
            tg.start_soon(join, "b")  # a new member: a rebalance starts
            await settle()
            tg.start_soon(rejoin_a)
            await settle()
            rejoin.cancel()  # a's client went away while its JoinGroup waited for c
            await settle()
            assert group.state is GroupState.PREPARING_REBALANCE
            tg.start_soon(join, "c2", c)
        assert rejoin.cancelled_caught
        # a still counts as joined (Kafka cannot tell it left): the rebalance completed
        assert results["b"]["error_code"] == 0
        assert results["b"]["generation_id"] == results["c2"]["generation_id"] == generation + 1
        assert no_waiters(co)
        b = results["b"]["member_id"]
        assert set(group.members) == {a, b, c}
        # the leader syncs; a never heartbeats again and expires with its session
        await co.sync_group("g", group.generation, results["c2"]["leader"], None,
                            [(a, b"A"), (b, b"B"), (c, b"C")])
        for _ in range(2):
            clock.now += 3000
            co.heartbeat("g", group.generation, b, None)
            co.heartbeat("g", group.generation, c, None)
            co.tick()
        assert a not in group.members and {b, c} <= set(group.members)
        assert no_waiters(co)
    run(main)
