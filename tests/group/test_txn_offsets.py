"""Transactional offset commits in the group coordinator: pending per producer
until the marker, committed on COMMIT, dropped on ABORT, rebuilt from the log."""

from __future__ import annotations

import pytest

from pybroker.errors import ErrorCode
from pybroker.group import records as rec
from pybroker.group.coordinator import GroupConfig, GroupCoordinator
from pybroker.group.offsets import OFFSETS_TOPIC, MemoryStore
from pybroker.group.txn_offsets import TxnData, TxnMarker, TxnOffsets


def make(store: MemoryStore | None = None) -> GroupCoordinator:
    return GroupCoordinator(GroupConfig(), store or MemoryStore(), lambda t, p: True)


def commit(c: GroupCoordinator, pid: int, offset: int, member: str = "",
           generation: int = -1) -> list[tuple[str, list[tuple[int, ErrorCode]]]]:
    pending = c.begin_txn_commit("g", pid, 0, generation, member, None,
                                 [("t", [(0, offset, -1, None)])])
    return c.finish_txn_commit(pending, ErrorCode.NONE)


def test_pending_until_commit_marker_then_committed() -> None:
    c = make()
    assert commit(c, 7, 42) == [("t", [(0, ErrorCode.NONE)])]
    assert c.fetch_offsets("g", [("t", [0])]) == [("t", [(0, None)])]
    assert c.unstable_offset("g", "t", 0)
    c.on_txn_marker(OFFSETS_TOPIC, 0, 7, 0, True, 100)
    [(_, [(_, entry)])] = c.fetch_offsets("g", [("t", [0])])
    assert entry is not None and entry.offset == 42
    assert not c.unstable_offset("g", "t", 0)


def test_abort_marker_drops_them() -> None:
    c = make()
    commit(c, 7, 42)
    c.on_txn_marker(OFFSETS_TOPIC, 0, 7, 0, False, 100)
    assert c.fetch_offsets("g", [("t", [0])]) == [("t", [(0, None)])]
    assert not c.unstable_offset("g", "t", 0)
    # another producer's marker or another topic's marker changes nothing
    commit(c, 8, 5)
    c.on_txn_marker(OFFSETS_TOPIC, 0, 9, 0, True, 101)
    c.on_txn_marker("other", 0, 8, 0, True, 102)
    assert c.unstable_offset("g", "t", 0)


def test_member_checks_of_a_group_commit() -> None:
    c = make()
    commit(c, 1, 1)
    c.on_txn_marker(OFFSETS_TOPIC, 0, 1, 0, True, 1)  # the group exists now (empty)
    assert commit(c, 2, 3, member="nobody", generation=1) == [
        ("t", [(0, ErrorCode.UNKNOWN_MEMBER_ID)])]
    assert commit(c, 2, 3) == [("t", [(0, ErrorCode.NONE)])]


class ReplayStore(MemoryStore):
    def __init__(self, items: list) -> None:  # type: ignore[type-arg]
        super().__init__()
        self.items = items

    def load(self, partition: int | None = None,  # type: ignore[no-untyped-def]
             transactions: bool = False):
        return iter(self.items if transactions else [])


def test_replay_applies_committed_and_drops_aborted() -> None:
    key = rec.offset_key("g", "t", 0)
    value = rec.offset_value(rec.OffsetValue(10, -1, "", 1))
    key1 = rec.offset_key("g", "t", 1)
    value1 = rec.offset_value(rec.OffsetValue(20, -1, "", 1))
    items = [TxnData(key, value, 5, 0, 0, 0), TxnMarker(5, True),
             TxnData(key1, value1, 6, 0, 0, 0), TxnMarker(6, False),
             TxnData(key1, value1, 7, 0, 3, 0)]  # still open
    c = make(ReplayStore(items))
    c.load(None)
    [(_, parts)] = c.fetch_offsets("g", [("t", [0, 1])])
    assert parts[0][1] is not None and parts[0][1].offset == 10
    assert parts[1][1] is None
    assert c.unstable_offset("g", "t", 1)
    # the next batch of producer 7 follows the replayed one's sequence
    assert c.txn_offsets.producer(0, 7, 0, 2).base_sequence == 4


def test_sequences_per_producer_and_epoch() -> None:
    t = TxnOffsets()
    first = t.producer(0, 1, 0, 3)
    assert first.base_sequence == 0
    assert t.producer(0, 1, 0, 1).base_sequence == 3
    assert t.producer(0, 1, 1, 1).base_sequence == 0  # a new epoch starts at 0
    sent = t.producer(0, 1, 1, 2)
    t.unsend(0, sent)
    assert t.producer(0, 1, 1, 1).base_sequence == sent.base_sequence


def test_a_marker_that_fails_to_apply_reloads_the_partition_from_its_log(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker is in the log whatever happens in memory: if applying it to the groups
    fails, the partition is loaded again from the log (marker included) instead of
    leaving the commit pending for good."""
    key = rec.offset_key("g", "t", 0)
    value = rec.offset_value(rec.OffsetValue(42, -1, "", 1))
    log_items: list = [TxnData(key, value, 7, 0, 0, 0)]  # type: ignore[type-arg]
    c = make(ReplayStore(log_items))
    c.load(None)
    assert c.unstable_offset("g", "t", 0)
    log_items.append(TxnMarker(7, True))  # the COMMIT marker reaches the log

    real_complete = c.txn_offsets.complete
    failures: list[int] = []

    def fails_once(*args: object) -> object:
        if not failures:
            failures.append(1)
            raise RuntimeError("a bug while completing the commit")
        return real_complete(*args)  # type: ignore[arg-type]
    monkeypatch.setattr(c.txn_offsets, "complete", fails_once)
    c.on_txn_marker(OFFSETS_TOPIC, 0, 7, 0, True, 100)
    assert failures == [1]
    [(_, [(_, entry)])] = c.fetch_offsets("g", [("t", [0])])
    assert entry is not None and entry.offset == 42
    assert not c.unstable_offset("g", "t", 0)
    assert c.owned is None  # still the coordinator of every group
