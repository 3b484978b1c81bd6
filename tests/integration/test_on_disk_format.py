"""Kafka's on-disk format: producer batches stored byte for byte, index file shapes."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from kafka.record.default_records import DefaultRecordBatch

from . import rawclient
from .helpers import create_topic

if TYPE_CHECKING:
    from conftest import BrokerFactory

SEGMENT = "00000000000000000000"


def split_batches(data: bytes) -> list[bytes]:
    out = []
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos:pos + 12 + length])
        pos += 12 + length
    assert pos == len(data), "trailing bytes in a cleanly written segment"
    return out


def test_segment_holds_producer_batches_verbatim(broker_factory: BrokerFactory,
                                                 topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    sent = []
    with rawclient.RawClient(b.bootstrap) as rc:
        for i, codec in enumerate([0, 1, 2, 3, 4]):
            recs = [rawclient.Rec(f"v{i}-{j}".encode() * 10, key=f"k{j}".encode(),
                                  headers=[("h", b"x")]) for j in range(4)]
            batch = rawclient.build_batch(recs, compression=codec)
            res = rc.produce(topic_name, 0, batch)
            assert res.error_code == 0 and res.base_offset == 4 * i
            sent.append(batch)
    assert b.stop() == 0
    stored = split_batches((b.data_dir / f"{topic_name}-0" / f"{SEGMENT}.log").read_bytes())
    assert len(stored) == len(sent)
    for i, (ours, disk) in enumerate(zip(sent, stored, strict=True)):
        assert len(disk) == len(ours)
        assert struct.unpack_from(">q", disk, 0)[0] == 4 * i  # base offset assigned
        assert disk[16:] == ours[16:], f"batch {i} re-encoded (magic..records must be verbatim)"
        parsed = DefaultRecordBatch(disk)
        assert parsed.validate_crc()
        assert [r.offset for r in parsed] == [4 * i + j for j in range(4)]


def test_index_files_shape(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(log_segment_bytes=64 * 1024)
    create_topic(b.bootstrap, topic_name)
    with rawclient.RawClient(b.bootstrap) as rc:
        for i in range(60):  # ~60 x 2 KB batches: several index entries and a roll
            batch = rawclient.build_batch([rawclient.Rec(bytes([i % 256]) * 2000)])
            assert rc.produce(topic_name, 0, batch).error_code == 0
    assert b.stop() == 0
    part = b.data_dir / f"{topic_name}-0"
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 2
    for log in logs:
        base = int(log.stem)
        index = log.with_suffix(".index").read_bytes()
        timeindex = log.with_suffix(".timeindex").read_bytes()
        assert len(index) % 8 == 0 and len(timeindex) % 12 == 0
        entries = [struct.unpack_from(">ii", index, k) for k in range(0, len(index), 8)]
        rel_offsets = [e[0] for e in entries]
        positions = [e[1] for e in entries]
        assert rel_offsets == sorted(rel_offsets) and positions == sorted(positions)
        data = log.read_bytes()
        for rel, pos in entries:
            # single-record batches: each entry points at the batch holding offset base + rel
            assert struct.unpack_from(">q", data, pos)[0] == base + rel
    # 4096-byte index interval and ~2 KB batches: the first (full) segment has entries
    assert logs[0].with_suffix(".index").stat().st_size >= 8
