"""Raw-socket pieces for the transaction log tests: a plain InitProducerId,
transactional batches built by hand, WriteTxnMarkers v1 (Kafka 4.0 has no v0; v1 is
flexible, so encoded with pybroker's codec), read_committed Fetch v4 and ListOffsets
v2 with an isolation level."""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker import protocol
from tests.integration.rawclient import RawClient, Reader, array, i8, i32, i64, string

INIT_PRODUCER_ID = 22
WRITE_TXN_MARKERS = 27
FETCH = 1
LIST_OFFSETS = 2
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def init_producer_id(c: RawClient) -> tuple[int, int]:
    """(producer id, epoch) from InitProducerId v0 without a transactional id."""
    r = Reader(c.request(INIT_PRODUCER_ID, 0, string(None) + i32(60000)))
    r.i32()
    err = r.i16()
    assert err == 0, f"InitProducerId error {err}"
    return r.i64(), r.i16()


def txn_batch(pid: int, epoch: int, seq: int, values: list[str],
              transactional: bool = True) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=transactional,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20,
    )
    # now: a timestamp far from the markers' (broker time) would roll segments by time
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        assert b.append(i, timestamp=now, key=None, value=v.encode(),
                        headers=[]) is not None
    return bytes(b.build())


def write_markers(c: RawClient, pid: int, epoch: int, commit: bool,
                  partitions: list[tuple[str, int]], coordinator_epoch: int = 0
                  ) -> dict[tuple[str, int], int]:
    """One WriteTxnMarkers v1 request with one marker; {(topic, partition): error}."""
    topics: dict[str, list[int]] = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    marker = {"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
              "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
              "coordinator_epoch": coordinator_epoch}
    corr = c.next_corr()
    c.send_raw(b"".join(bytes(part) for part in protocol.encode_request(
        WRITE_TXN_MARKERS, 1, corr, "raw-test", {"markers": [marker]})))
    got, rest = c.recv()
    assert got == corr
    _, answer = protocol.decode_response(WRITE_TXN_MARKERS, 1, struct.pack(">i", got) + rest)
    return {(t["name"], p["partition_index"]): p["error_code"]
            for m in answer["markers"] for t in m["topics"] for p in t["partitions"]}


@dataclass
class Fetched:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    aborted: list[tuple[int, int]] | None
    records: bytes


def fetch(c: RawClient, topic: str, offset: int, isolation: int = READ_COMMITTED,
          partition: int = 0, max_wait_ms: int = 0) -> Fetched:
    part = i32(partition) + i64(offset) + i32(1 << 20)
    body = (i32(-1) + i32(max_wait_ms) + i32(1) + i32(1 << 20) + i8(isolation)
            + array([string(topic) + array([part])]))
    r = Reader(c.request(FETCH, 4, body))
    r.i32()
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err, hw, lso = r.i16(), r.i64(), r.i64()
    n = r.i32()
    aborted = None if n < 0 else [(r.i64(), r.i64()) for _ in range(n)]
    return Fetched(err, hw, lso, aborted, r.bytes_() or b"")


def list_latest(c: RawClient, topic: str, isolation: int, partition: int = 0,
                timestamp: int = -1) -> int:
    """ListOffsets v2's offset for `timestamp` (-1: latest)."""
    body = (i32(-1) + i8(isolation)
            + array([string(topic) + array([i32(partition) + i64(timestamp)])]))
    r = Reader(c.request(LIST_OFFSETS, 2, body))
    r.i32()
    r.i32()
    r.string()
    r.i32()
    r.i32()
    err = r.i16()
    assert err == 0, f"ListOffsets error {err}"
    r.i64()
    return r.i64()


def record_offsets(records: bytes) -> list[int]:
    """Offsets of the data records (control batches left out) in fetched bytes."""
    from kafka.record.default_records import DefaultRecordBatch
    out = []
    pos = 0
    while pos + 12 <= len(records):
        length = int.from_bytes(records[pos + 8:pos + 12], "big")
        end = pos + 12 + length
        if end > len(records):
            break
        batch = DefaultRecordBatch(records[pos:end])
        if not batch.is_control_batch:
            out.extend(r.offset for r in batch)
        pos = end
    return out
