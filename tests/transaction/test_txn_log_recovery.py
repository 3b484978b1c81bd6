"""Transactions survive a crash: kill -9 with a transaction open, restart, and the
last stable offset is still held at it; the `.txnindex` (removed while the broker
was down) is rebuilt byte for byte from the markers; a clean stop writes the open
transaction into the `.snapshot`; the transaction then ends normally."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TYPE_CHECKING

from tests.integration.helpers import consume_confluent, create_topic
from tests.integration.rawclient import RawClient
from tests.transaction.txnraw import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    fetch,
    init_producer_id,
    list_latest,
    txn_batch,
    write_markers,
)

if TYPE_CHECKING:
    from conftest import BrokerFactory


def aborted_entry(pid: int, first: int, last: int, lso: int) -> bytes:
    """One Kafka AbortedTxn entry: version 0, producerId, firstOffset, lastOffset, LSO."""
    return struct.pack(">hqqqq", 0, pid, first, last, lso)


def snapshot_txn_first_offsets(path: Path) -> dict[int, int]:
    """producerId -> currentTxnFirstOffset of a Kafka producer snapshot (version 1)."""
    data = path.read_bytes()
    version, _crc, count = struct.unpack(">hIi", data[:10])
    assert version == 1
    out = {}
    for i in range(count):
        entry = data[10 + 46 * i:10 + 46 * (i + 1)]
        pid, = struct.unpack(">q", entry[:8])
        out[pid], = struct.unpack(">q", entry[38:46])
    return out


def test_kill9_with_an_open_transaction(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    part_dir = b.data_dir / f"{topic_name}-0"
    txnindex = part_dir / "00000000000000000000.txnindex"
    with RawClient(b.bootstrap) as c:
        a, a_epoch = init_producer_id(c)
        p, p_epoch = init_producer_id(c)
        assert c.produce(topic_name, 0, txn_batch(a, a_epoch, 0, ["a0", "a1"])).error_code == 0
        assert write_markers(c, a, a_epoch, False, [(topic_name, 0)]) == {(topic_name, 0): 0}
        assert c.produce(topic_name, 0, txn_batch(p, p_epoch, 0, ["p0"])).base_offset == 3
        assert list_latest(c, topic_name, READ_COMMITTED) == 3
    expected_index = aborted_entry(a, 0, 2, 3)
    assert txnindex.read_bytes() == expected_index

    b.kill()
    txnindex.unlink()
    b.start()
    with RawClient(b.bootstrap) as c:
        assert list_latest(c, topic_name, READ_COMMITTED) == 3, "the LSO is still held"
        assert list_latest(c, topic_name, READ_UNCOMMITTED) == 4
        f = fetch(c, topic_name, 0)
        assert (f.last_stable_offset, f.aborted) == (3, [(a, 0)])
        assert txnindex.read_bytes() == expected_index, "rebuilt from the marker"
        # a non-transactional write of the producer inside its transaction is still refused
        assert c.produce(topic_name, 0, txn_batch(p, p_epoch, 1, ["x"], False)).error_code == 48
        assert write_markers(c, p, p_epoch, True, [(topic_name, 0)]) == {(topic_name, 0): 0}
        assert list_latest(c, topic_name, READ_COMMITTED) == 5
        # a new transaction of `a`, open across a clean stop
        assert c.produce(topic_name, 0, txn_batch(a, a_epoch, 2, ["a2"])).base_offset == 5
    got = consume_confluent(b.bootstrap, topic_name, 1, **{"isolation.level": "read_committed"})
    assert [g.value for g in got] == [b"p0"]

    b.stop()
    snapshots = sorted(part_dir.glob("*.snapshot"))
    assert snapshots[-1].name == "00000000000000000006.snapshot"
    assert snapshot_txn_first_offsets(snapshots[-1]) == {a: 5, p: -1}
    b.start()
    with RawClient(b.bootstrap) as c:
        assert list_latest(c, topic_name, READ_COMMITTED) == 5
        assert write_markers(c, a, a_epoch, False, [(topic_name, 0)]) == {(topic_name, 0): 0}
        assert list_latest(c, topic_name, READ_COMMITTED) == 7
        assert fetch(c, topic_name, 0).aborted == [(a, 0), (a, 5)]
    assert txnindex.read_bytes() == expected_index + aborted_entry(a, 5, 6, 7)
    got = consume_confluent(b.bootstrap, topic_name, 1, **{"isolation.level": "read_committed"})
    assert [g.value for g in got] == [b"p0"]
