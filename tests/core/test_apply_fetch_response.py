"""`_core.apply_fetch_response`: the replica fetcher's Rust walk of a Fetch v12
response, checked against frames the Python codec (the one declaration of the
message) encodes, and the follower appends it makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

_core = pytest.importorskip("pybroker._core")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from pybroker import protocol  # noqa: E402
from pybroker._core import (  # noqa: E402
    CorruptRecordError,
    PartitionLog,
    UnexpectedAppendOffsetError,
    apply_fetch_response,
)

FETCH = 1
VERSION = 12
NOW = 1_700_000_000_000


def batch(base_offset: int, n: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=NOW + i, key=None, value=b"v%d" % i, headers=[])
    data = bytearray(b.build())
    data[0:8] = base_offset.to_bytes(8, "big")  # the offset is outside the CRC
    return bytes(data)


def answer(index: int, records: bytes | None, *, error: int = 0, hw: int = 0,
           log_start: int = 0, aborted: list[dict[str, int]] | None = None) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "high_watermark": hw,
            "last_stable_offset": hw, "log_start_offset": log_start,
            "diverging_epoch": {"epoch": 3, "end_offset": 9},
            "aborted_transactions": aborted, "preferred_read_replica": -1,
            "records": records}


def frame(topics: dict[str, list[dict[str, Any]]], *, correlation_id: int = 5,
          session_id: int = 77, error: int = 0) -> bytes:
    parts = protocol.encode_response(FETCH, VERSION, correlation_id, {
        "throttle_time_ms": 0, "error_code": error, "session_id": session_id,
        "responses": [{"topic": t, "partitions": ps} for t, ps in topics.items()]})
    data = b"".join(bytes(p) for p in parts)
    return data[4:]  # without the size prefix, as the connection hands it over


def open_log(path: Path) -> PartitionLog:
    return PartitionLog(str(path))


def test_walks_every_partition_and_appends_those_given(tmp_path: Path) -> None:
    a0, a1, b0 = (open_log(tmp_path / n) for n in ("a-0", "a-1", "b-0"))
    records_a0 = batch(0, 3) + batch(3, 2)
    data = frame({
        "a": [answer(0, records_a0, hw=4, log_start=0,
                     aborted=[{"producer_id": 1, "first_offset": 0}]),
              answer(1, None, hw=0),
              answer(2, batch(0, 1), hw=1)],  # not followed here: not appended
        "b": [answer(0, None, error=6, hw=-1, log_start=-1)]})
    applied = apply_fetch_response(memoryview(data), VERSION,
                                   {("a", 0): a0, ("a", 1): a1, ("b", 0): b0})
    assert (applied.correlation_id, applied.session_id, applied.error_code) == (5, 77, 0)
    got = {(p.topic, p.partition): p for p in applied.partitions}
    assert list(got) == [("a", 0), ("a", 1), ("a", 2), ("b", 0)]
    p = got[("a", 0)]
    assert (p.appended, p.record_count, p.log_end_offset, p.high_watermark,
            p.records_bytes, p.error) == (True, 5, 5, 4, len(records_a0), None)
    assert a0.log_end_offset == 5
    assert a0.read(0, 1 << 20, min_one=True).read() == records_a0  # the leader's bytes
    assert (got[("a", 1)].appended, got[("a", 1)].log_end_offset) == (False, -1)
    assert not got[("a", 2)].appended and got[("a", 2)].records_bytes > 0
    assert (got[("b", 0)].error_code, got[("b", 0)].appended) == (6, False)
    assert a1.log_end_offset == b0.log_end_offset == 0


def test_a_refused_append_is_reported_and_the_others_go_on(tmp_path: Path) -> None:
    x, y = open_log(tmp_path / "x-0"), open_log(tmp_path / "y-0")
    x.append_as_follower(batch(0, 4))
    # x is at 4: a batch starting at 1 is below its end
    data = frame({"x": [answer(0, batch(1, 2), hw=3)], "y": [answer(0, batch(0, 2), hw=2)]})
    applied = apply_fetch_response(data, VERSION, {("x", 0): x, ("y", 0): y})
    px, py = applied.partitions
    assert isinstance(px.error, UnexpectedAppendOffsetError)
    assert px.appended and x.log_end_offset == 4
    assert py.error is None and y.log_end_offset == 2


def test_a_malformed_frame_appends_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    data = frame({"t": [answer(0, batch(0, 2), hw=2)]})
    for end in (0, 3, 10, len(data) - 1):
        with pytest.raises(CorruptRecordError):
            apply_fetch_response(data[:end], VERSION, {("t", 0): log})
    assert log.log_end_offset == 0


def test_only_the_fetchers_version_is_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        apply_fetch_response(frame({}), 13, {})
