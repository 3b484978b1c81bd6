"""The transaction coordinator's state machine, in process, over a store in
memory and a marker sender that records what it was asked to send."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.errors import ErrorCode
from pybroker.transaction import records
from pybroker.transaction.coordinator import TransactionCoordinator
from pybroker.transaction.log import partition_for
from pybroker.transaction.records import TxnState, TxnValue
from pybroker.transaction.state import EPOCH_EXHAUSTED

E = ErrorCode
S = TxnState


class MemoryLog:
    """TransactionLog's interface over lists, one per partition."""

    partition_count = 1

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.fail_with: ErrorCode | None = None

    def partition_of(self, transactional_id: str) -> int:
        return 0

    async def ensure(self) -> None:
        pass

    async def write(self, index: int, key: bytes, value: bytes | None) -> ErrorCode:
        if self.fail_with is not None:
            return self.fail_with
        self.records.append((key, value))
        return ErrorCode.NONE

    def load(self, index: int) -> Iterator[tuple[bytes, bytes | None]]:
        return iter(list(self.records))

    def states(self) -> list[TxnState]:
        return [records.decode_value(v).state for _, v in self.records if v is not None]


class Ids:
    def __init__(self) -> None:
        self.next = 1000

    async def next_id(self) -> int:
        self.next += 1
        return self.next


class Sender:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, **kw: Any) -> bool:
        self.sent.append(kw)
        return True

    async def close(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def make(log: MemoryLog | None = None, **config: Any
         ) -> tuple[TransactionCoordinator, MemoryLog, Sender, Clock]:
    log = log or MemoryLog()
    clock = Clock()
    coordinator = TransactionCoordinator(BrokerConfig(config), log, Ids(),  # type: ignore[arg-type]
                                         wall=clock)
    sender = Sender()
    coordinator.sender = sender  # type: ignore[assignment]
    return coordinator, log, sender, clock


async def loaded(coordinator: TransactionCoordinator, epoch: int = 7) -> None:
    coordinator.partition_led(0, epoch)
    queued, coordinator._queued = coordinator._queued, []
    for fn, args in queued:
        await fn(*args)


async def drain(coordinator: TransactionCoordinator) -> None:
    """Run the background completions (markers, Complete*) queued so far."""
    while coordinator._queued:
        fn, args = coordinator._queued.pop(0)
        await fn(*args)


def test_record_layouts_are_kafkas() -> None:
    key = records.encode_key("tx")
    assert key == b"\x00\x00\x00\x02tx"
    value = TxnValue(5, 3, 60000, S.ONGOING, {"a": [0, 2]}, 111, 100)
    raw = records.encode_value(value)
    assert raw == (struct.pack(">hqhib", 0, 5, 3, 60000, 1) + struct.pack(">i", 1)
                   + b"\x00\x01a" + struct.pack(">iii", 2, 0, 2) + struct.pack(">qq", 111, 100))
    assert records.decode_value(raw) == value
    assert records.decode_key(key) == "tx"


def test_partition_is_kafkas_utils_abs_of_the_java_hash() -> None:
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs maps it to 0
    assert partition_for("polygenelubricants", 50) == 0
    # "a".hashCode() == 97; "Aa" and "BB" collide (2112)
    assert partition_for("a", 50) == 97 % 50
    assert partition_for("Aa", 50) == partition_for("BB", 50) == 2112 % 50
    # a negative hash: Math.abs, not & 0x7fffffff ("hello world!".hashCode() < 0)
    h = 0
    for ch in "hello world!!":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    assert partition_for("hello world!!", 50) == abs(signed) % 50


def test_not_coordinator_until_loaded() -> None:
    async def main() -> None:
        c, _, _, _ = make()
        assert (await c.init_producer_id("t", 60000))[0] == E.NOT_COORDINATOR
        c.partition_led(0, 1)
        assert (await c.init_producer_id("t", 60000))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        await loaded(c, 1)
        assert (await c.init_producer_id("t", 60000))[0] == E.NONE
        c.partition_lost(0)
        assert (await c.init_producer_id("t", 60000))[0] == E.NOT_COORDINATOR

    anyio.run(main)


def test_epochs_fencing_and_a_full_transaction() -> None:
    async def main() -> None:
        c, log, sender, _ = make()
        await loaded(c)
        code, pid, epoch = await c.init_producer_id("t", 60000)
        assert (code, epoch) == (E.NONE, 0)
        assert await c.add_partitions("t", pid, epoch, [("a", 0), ("a", 1)]) == E.NONE
        assert await c.add_partitions("t", pid + 1, epoch, [("a", 0)]) == \
            E.INVALID_PRODUCER_ID_MAPPING
        assert await c.end_txn("t", pid, epoch, True) == E.NONE
        assert c.txns["t"].pending == S.COMPLETE_COMMIT
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == E.CONCURRENT_TRANSACTIONS
        await drain(c)
        assert sender.sent[-1]["commit"] is True
        assert sender.sent[-1]["partitions"] == [("a", 0), ("a", 1)]
        assert sender.sent[-1]["coordinator_epoch"] == 7
        assert log.states() == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
        assert await c.end_txn("t", pid, epoch, True) == E.NONE  # a retry
        assert await c.end_txn("t", pid, epoch, False) == E.INVALID_TXN_STATE
        # a second instance bumps the epoch: the first is fenced
        code, pid2, epoch2 = await c.init_producer_id("t", 60000)
        assert (code, pid2, epoch2) == (E.NONE, pid, 1)
        assert await c.add_partitions("t", pid, 0, [("a", 0)]) == E.PRODUCER_FENCED
        assert await c.end_txn("t", pid, 0, True) == E.PRODUCER_FENCED

    anyio.run(main)


def test_ongoing_transaction_of_a_fenced_producer_is_aborted() -> None:
    async def main() -> None:
        c, log, sender, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 60000)
        await c.add_partitions("t", pid, epoch, [("a", 0)])
        code, _, _ = await c.init_producer_id("t", 60000)
        assert code == E.CONCURRENT_TRANSACTIONS
        await drain(c)
        assert sender.sent[-1]["commit"] is False
        assert sender.sent[-1]["producer_epoch"] == epoch + 1  # the fencing epoch
        code, pid2, epoch2 = await c.init_producer_id("t", 60000)
        assert (code, pid2, epoch2) == (E.NONE, pid, epoch + 2)
        assert log.states()[-3:] == [S.PREPARE_ABORT, S.COMPLETE_ABORT, S.EMPTY]

    anyio.run(main)


def test_kip_360_bump_retry_and_fenced_instance() -> None:
    async def main() -> None:
        c, _, _, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 60000)
        code, pid1, epoch1 = await c.init_producer_id("t", 60000, pid, epoch)
        assert (code, pid1, epoch1) == (E.NONE, pid, epoch + 1)
        # the answer was lost: the retry gets the same id/epoch
        assert await c.init_producer_id("t", 60000, pid, epoch) == (E.NONE, pid, epoch + 1)
        # a new instance bumps without an expected epoch; the old one is fenced
        _, _, epoch2 = await c.init_producer_id("t", 60000)
        assert epoch2 == epoch + 2
        assert (await c.init_producer_id("t", 60000, pid, epoch + 1))[0] == E.PRODUCER_FENCED
        assert (await c.init_producer_id("t", 60000, pid, epoch))[0] == E.PRODUCER_FENCED

    anyio.run(main)


def test_exhausted_epoch_gives_a_new_producer_id() -> None:
    async def main() -> None:
        c, _, _, _ = make()
        await loaded(c)
        _, pid, _ = await c.init_producer_id("t", 60000)
        c.txns["t"].producer_epoch = EPOCH_EXHAUSTED
        code, pid2, epoch2 = await c.init_producer_id("t", 60000)
        assert code == E.NONE and pid2 != pid and epoch2 == 0

    anyio.run(main)


def test_timeout_limits_and_timed_out_transactions() -> None:
    async def main() -> None:
        c, log, sender, clock = make(**{"transaction.max.timeout.ms": "10000"})
        await loaded(c)
        assert (await c.init_producer_id("t", 10001))[0] == E.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id("t", 0))[0] == E.INVALID_TRANSACTION_TIMEOUT
        _, pid, epoch = await c.init_producer_id("t", 5000)
        await c.add_partitions("t", pid, epoch, [("a", 0)])
        clock.now += 4000
        assert await c.abort_timed_out() == 0
        clock.now += 2000
        assert await c.abort_timed_out() == 1
        await drain(c)
        assert sender.sent[-1]["commit"] is False
        assert c.txns["t"].state == S.COMPLETE_ABORT
        assert await c.end_txn("t", pid, epoch, True) == E.PRODUCER_FENCED

    anyio.run(main)


def test_prepared_transactions_are_completed_on_load() -> None:
    async def main() -> None:
        log = MemoryLog()
        log.records.append((records.encode_key("t"), records.encode_value(TxnValue(
            9, 2, 60000, S.PREPARE_COMMIT, {"a": [1]}, 10, 5))))
        c, _, sender, _ = make(log)
        await loaded(c, epoch=4)
        assert c.txns["t"].state == S.PREPARE_COMMIT
        await drain(c)
        assert sender.sent == [dict(producer_id=9, producer_epoch=2, coordinator_epoch=4,
                                    commit=True, partitions=[("a", 1)],
                                    still_coordinator=sender.sent[0]["still_coordinator"])]
        assert c.txns["t"].state == S.COMPLETE_COMMIT
        assert log.states()[-1] == S.COMPLETE_COMMIT

    anyio.run(main)


def test_failed_state_write_leaves_the_state_unchanged() -> None:
    async def main() -> None:
        c, log, _, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 60000)
        log.fail_with = E.COORDINATOR_NOT_AVAILABLE
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == \
            E.COORDINATOR_NOT_AVAILABLE
        assert c.txns["t"].state == S.EMPTY and c.txns["t"].pending is None

    anyio.run(main)


def test_idle_transactional_ids_expire() -> None:
    async def main() -> None:
        c, log, _, clock = make(**{"transactional.id.expiration.ms": "1000"})
        await loaded(c)
        await c.init_producer_id("t", 60000)
        clock.now += 1001
        assert await c.expire_transactional_ids() == 1
        assert "t" not in c.txns
        assert log.records[-1][1] is None  # a tombstone

    anyio.run(main)


@pytest.mark.parametrize("names,expected", [(["Ongoing"], ["b"]), (["Empty"], ["a"]),
                                            ([], ["a", "b"])])
def test_list_filters_by_state(names: list[str], expected: list[str]) -> None:
    async def main() -> None:
        c, _, _, _ = make()
        await loaded(c)
        await c.init_producer_id("a", 60000)
        _, pid, epoch = await c.init_producer_id("b", 60000)
        await c.add_partitions("b", pid, epoch, [("x", 0)])
        states = {records.STATE_BY_NAME[n] for n in names} or None
        code, listed = c.list(states, None)
        assert code == E.NONE and [m.transactional_id for m in listed] == expected

    anyio.run(main)


def test_a_newer_leadership_wins_over_an_older_pending_load() -> None:
    async def main() -> None:
        c, _, _, _ = make()
        c.partition_led(0, 1)
        c.partition_led(0, 2)  # led again before the first load ran
        await drain(c)
        assert c.owned == {0: 2} and not c.loading

    anyio.run(main)


def test_an_unreadable_state_record_refuses_its_id_not_a_fresh_start() -> None:
    """A state the coordinator cannot read (a corrupt or unknown value) would leave an
    older state in force, or none: an older producer epoch not fenced, an open
    transaction forgotten. Its id is refused (COORDINATOR_LOAD_IN_PROGRESS); the other
    ids of the partition are served; a later readable record or tombstone settles it."""
    async def main() -> None:
        c, log, _, _ = make()
        await loaded(c, 1)
        code, pid, epoch = await c.init_producer_id("t", 60000)
        assert code == E.NONE
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == E.NONE
        assert (await c.init_producer_id("u", 60000))[0] == E.NONE
        # the latest state of "t" (ONGOING) is unreadable
        key, value = log.records[-2]
        assert records.decode_key(key) == "t" and value is not None
        log.records[-2] = (key, struct.pack(">h", 9) + value[2:])
        c.partition_lost(0)
        await loaded(c, 2)
        assert (await c.init_producer_id("t", 60000))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        assert await c.add_partitions("t", pid, epoch, [("a", 1)]) == \
            E.COORDINATOR_LOAD_IN_PROGRESS
        assert (await c.init_producer_id("u", 60000))[0] == E.NONE
        # a tombstone after it: the id is gone, and starts anew
        log.records.append((key, None))
        c.partition_lost(0)
        await loaded(c, 3)
        assert (await c.init_producer_id("t", 60000))[0] == E.NONE

    anyio.run(main)


def test_an_unreadable_key_refuses_the_whole_partition() -> None:
    async def main() -> None:
        c, log, _, _ = make()
        await loaded(c, 1)
        assert (await c.init_producer_id("u", 60000))[0] == E.NONE
        log.records.append((b"\x00\x00\x00\x09", b""))  # a key of version 0 cut short
        c.partition_lost(0)
        await loaded(c, 2)
        assert (await c.init_producer_id("u", 60000))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        assert (await c.init_producer_id("v", 60000))[0] == E.COORDINATOR_LOAD_IN_PROGRESS

    anyio.run(main)
