"""pybroker.spark pieces that need no SparkSession: Rust columns -> Arrow, range
splitting, maxOffsetsPerTrigger shares, option parsing."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pybroker._core import (  # noqa: E402
    build_batch,
    build_batch_arrow,
    decode_columns,
    key_partitions,
)
from pybroker.spark.arrow import arrow_schema, to_record_batch  # noqa: E402
from pybroker.spark.options import SourceOptions, split_ranges  # noqa: E402
from pybroker.spark.source import _rate_limit  # noqa: E402


def test_columns_to_arrow_zero_copy_and_exact_schema() -> None:
    keys = [b"a", None, b"", b"dd"]
    values = [b"1", b"22", None, b"4444"]
    headers = [[("h", b"x"), ("n", None)], None, [], [("k", b"")]]
    batch = build_batch(keys, values, 1_700_000_000_000, headers)
    # a second batch (offsets 0..3 again: base offset is 0) is skipped as already read
    cols = decode_columns(batch + batch[:-5], 1, 100, include_headers=True)
    assert len(cols) == 3 and cols.next_offset == 4
    rb = to_record_batch(cols, "t", 7, arrow_schema(True))
    assert rb.schema == arrow_schema(True)
    rb.validate(full=True)
    assert rb.column("key").to_pylist() == [None, b"", b"dd"]
    assert rb.column("value").to_pylist() == [b"22", None, b"4444"]
    assert rb.column("offset").to_pylist() == [1, 2, 3]
    assert rb.column("partition").to_pylist() == [7, 7, 7]
    assert rb.column("topic").to_pylist() == ["t", "t", "t"]
    assert rb.column("timestamp").to_pylist()[0].timestamp() == 1_700_000_000
    # no headers -> null, as Spark's Kafka source gives
    assert rb.column("headers").to_pylist() == [None, None, [{"key": "k", "value": b""}]]
    addr, _ = cols.buffers()["value_data"]
    assert rb.column("value").buffers()[2].address == addr  # no copy
    del cols
    assert rb.column("value").to_pylist()[2] == b"4444"  # the buffer keeps cols alive


def test_build_batch_arrow_equals_build_batch() -> None:
    keys = pa.array([b"a", None, b"", b"dd", b"e"]).slice(1)
    values = pa.array(["x", "yy", None, "", "zzz"], pa.string()).cast(pa.binary()).slice(1)

    def parts(a: pa.Array) -> tuple:
        v, o, d = a.buffers()
        return v, o, d, a.offset, len(a)

    got = build_batch_arrow(parts(values), 5, parts(keys))
    assert got == build_batch(keys.to_pylist(), values.to_pylist(), 5)
    with pytest.raises(ValueError):
        build_batch_arrow(parts(values), 5, parts(keys.slice(1)))


def test_key_partitions_match_kafka_default_partitioner() -> None:
    # murmur2("21") = -973932308 (Kafka's UtilsTest); & 0x7fffffff then % n
    assert key_partitions([b"21", None], 1000) == [(-973932308 & 0x7FFFFFFF) % 1000, -1]


def test_split_ranges() -> None:
    tp0, tp1 = ("t", 0), ("t", 1)
    assert split_ranges([(tp0, 0, 10), (tp1, 5, 5)], None, None) == [(tp0, 0, 10),
                                                                      (tp1, 5, 5)]
    assert split_ranges([(tp0, 0, 10)], None, 4) == [(tp0, 0, 3), (tp0, 3, 6), (tp0, 6, 10)]
    pieces = split_ranges([(tp0, 0, 90), (tp1, 0, 10)], 10, None)
    assert [p for p in pieces if p[0] == tp0][-1] == (tp0, 80, 90) and len(pieces) == 10


def test_rate_limit_shares_backlog() -> None:
    begin = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 5}
    assert _rate_limit(begin, latest, 100) == {("t", 0): 90, ("t", 1): 110, ("t", 2): 5}
    assert _rate_limit(begin, latest, 10_000) == latest


def test_options_like_spark() -> None:
    opts = SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a, b"})
    assert opts.subscribe == ("a", "b") and opts.fail_on_data_loss
    assert not opts.include_headers
    with pytest.raises(ValueError, match="exactly one"):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a",
                             "assign": '{"a": [0]}'})
    opts = SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "assign": '{"a": [1, 0]}',
                                "startingOffsetsByTimestamp": '{"a": {"0": 5, "1": 6}}'})
    assert opts.assign == (("a", 0), ("a", 1))
    assert opts.starting_by_timestamp is not None
    with pytest.raises(ValueError, match="bootstrap"):
        SourceOptions.parse({"subscribe": "a"})
