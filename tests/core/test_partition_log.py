"""Tests of the pyo3 binding `pybroker._core` (rust/core-py) over the Rust log engine."""

from __future__ import annotations

import os
import socket
import struct

import pytest

_core = pytest.importorskip("pybroker._core")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from pybroker._core import (  # noqa: E402
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
)


def make_batch(n: int = 3, ts: int = 1_000, value_size: int = 10, codec: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k%d" % i, value=bytes([65 + i % 26]) * value_size,
                 headers=[])
    return bytes(b.build())


def batches(data: bytes):
    """(base_offset, last_offset, leader_epoch) of each batch in data."""
    out, pos = [], 0
    while pos < len(data):
        base, length, epoch = struct.unpack_from(">qii", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((base, base + delta, epoch))
        pos += length + 12
    return out


def test_crc32c_matches_known_vector():
    assert _core.crc32c(b"123456789") == 0xE3069283
    assert _core.crc32c(bytearray(b"123456789")) == 0xE3069283
    assert _core.crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283


def test_append_read_round_trip(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    batch = make_batch(3)
    r = log.append(batch, 7, 123)
    assert (r.base_offset, r.last_offset, r.record_count, r.batch_count) == (0, 2, 3, 1)
    assert r.log_append_time_ms == -1
    assert log.log_end_offset == 3
    s = log.read(0, 1 << 20, min_one=False)
    data = s.read()
    assert s.length == len(batch) == len(data)
    assert batches(data) == [(0, 2, 7)]
    assert data[16:] == batch[16:]  # only base offset and leader epoch rewritten
    assert log.read(3, 1 << 20, min_one=False) is None
    log.close()


def test_offsets_across_appends_and_buffer_types(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    a, b, c = make_batch(2), make_batch(5), make_batch(1)
    assert log.append(a, 0, 0).base_offset == 0
    assert log.append(bytearray(b), 0, 0).base_offset == 2
    assert log.append(memoryview(b"xx" + c)[2:], 0, 0).base_offset == 7
    r = log.append(a + c, 1, 0)
    assert (r.base_offset, r.last_offset, r.batch_count) == (8, 10, 2)
    assert log.log_end_offset == 11
    for off, first in [(0, 0), (1, 0), (2, 2), (6, 2), (7, 7), (9, 8), (10, 10)]:
        got = batches(log.read(off, 1 << 20, min_one=True).read())
        assert got[0][0] == first
        assert got[-1][1] == 10
    one = batches(log.read(3, 1, min_one=True).read())
    assert one == [(2, 6, 0)]
    assert log.read(3, 1, min_one=False) is None
    assert batches(log.read(0, 1 << 20, min_one=False, max_offset=7).read())[-1][1] == 6
    assert log.read(7, 1 << 20, min_one=False, max_offset=7) is None


def test_roll_by_segment_bytes_names_files_with_20_digits(tmp_path):
    d = tmp_path / "t-0"
    batch = make_batch(2, value_size=200)
    log = PartitionLog(str(d), segment_bytes=len(batch) * 2)
    for _ in range(5):
        log.append(batch, 0, 0)
    assert log.segment_count == 3
    logs = sorted(f for f in os.listdir(d) if f.endswith(".log"))
    assert logs == [f"{o:020d}.log" for o in (0, 4, 8)]
    for base in (0, 4, 8):
        assert (d / (f"{base:020d}.index")).exists()
        assert (d / (f"{base:020d}.timeindex")).exists()
    assert batches(log.read(4, 1 << 20, min_one=False).read())[0][0] == 4
    log.roll()
    assert log.segment_count == 4
    log.close()


def test_bad_crc_raises_and_appends_nothing(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    good = make_batch(2)
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(good + bytes(bad), 0, 0)
    assert log.log_end_offset == 0
    assert log.size_bytes == 0
    with pytest.raises(CorruptRecordError):
        log.append(good[:-3], 0, 0)
    assert log.append(good, 0, 0).base_offset == 0


def test_invalid_record_count(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    b = bytearray(make_batch(2))
    struct.pack_into(">i", b, 23, 5)  # lastOffsetDelta != recordCount - 1
    struct.pack_into(">I", b, 17, _core.crc32c(bytes(b[21:])))
    with pytest.raises(InvalidRecordError):
        log.append(bytes(b), 0, 0)


def test_oversize_batch_raises(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), max_message_bytes=500)
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch(2, value_size=600), 0, 0)
    assert log.log_end_offset == 0


def test_reopen_after_garbage_truncates_it(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog(str(d))
    for _ in range(3):
        log.append(make_batch(2), 0, 0)
    size = log.size_bytes
    log.flush()
    del log
    seg = d / "00000000000000000000.log"
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09garbage bytes")
    log = PartitionLog(str(d), clean_shutdown=False)
    assert log.log_end_offset == 6
    assert os.path.getsize(seg) == size
    assert log.append(make_batch(1), 0, 0).base_offset == 6
    log.close()
    log = PartitionLog(str(d), clean_shutdown=True)
    assert log.log_end_offset == 7
    assert os.path.getsize(d / "00000000000000000000.index") % 8 == 0


def test_offset_for_timestamp(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    log.append(make_batch(3, ts=1_000), 0, 0)  # offsets 0-2, ts 1000-1002
    log.append(make_batch(3, ts=2_000), 0, 0)  # offsets 3-5, ts 2000-2002
    assert log.offset_for_timestamp(0) == (0, 1_000)
    assert log.offset_for_timestamp(1_001) == (1, 1_001)
    assert log.offset_for_timestamp(1_500) == (3, 2_000)
    assert log.offset_for_timestamp(2_002) == (5, 2_002)
    assert log.offset_for_timestamp(3_000) is None


def test_log_append_time(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), log_append_time=True)
    r = log.append(make_batch(2, ts=5), 0, 99_000)
    assert r.log_append_time_ms == 99_000
    assert log.offset_for_timestamp(50_000) == (0, 99_000)
    data = log.read(0, 1 << 20, min_one=True).read()
    (attrs,) = struct.unpack_from(">h", data, 21)
    assert attrs & 8
    (crc,) = struct.unpack_from(">I", data, 17)
    assert crc == _core.crc32c(data[21:])


def test_offset_out_of_range(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    log.append(make_batch(2), 0, 0)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100, min_one=True)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100, min_one=True)
    assert log.read(2, 100, min_one=True) is None


def test_file_slice_sendfile_over_socketpair(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    log.append(make_batch(50, value_size=100), 0, 0)
    s = log.read(0, 1 << 20, min_one=True)
    a, b = socket.socketpair()
    try:
        a.setblocking(False)
        sent = 0
        received = bytearray()
        while sent < s.length:
            try:
                sent += s.sendfile(a.fileno(), sent)
            except BlockingIOError:
                pass
            received += b.recv(1 << 16)
        while len(received) < s.length:
            received += b.recv(1 << 16)
        assert bytes(received) == s.read()
        # Fill the socket buffer until the kernel refuses: BlockingIOError.
        with pytest.raises(BlockingIOError):
            for _ in range(10_000):
                s.sendfile(a.fileno(), 0)
    finally:
        a.close()
        b.close()


def test_closed_log_raises_storage_error(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    log.append(make_batch(1), 0, 0)
    log.close()
    log.close()
    assert log.log_end_offset == 1
    with pytest.raises(_core.StorageError):
        log.append(make_batch(1), 0, 0)


def test_truncate_and_advance_log_start(tmp_path):
    batch = make_batch(2, value_size=100)
    log = PartitionLog(str(tmp_path / "t-0"), segment_bytes=len(batch) * 2)
    for _ in range(6):
        log.append(batch, 0, 0)
    assert [i[0] for i in log.segment_infos()] == [0, 4, 8]
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert log.advance_log_start_offset(5) == 1
    assert log.log_start_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100, min_one=True)
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start_offset(7)
