"""__consumer_offsets key/value formats, batches, and the group -> partition hash."""

from __future__ import annotations

import struct
from pathlib import Path

from pybroker._core import PartitionLog
from pybroker.group import records as rec
from pybroker.group.offsets import java_string_hash, partition_for


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    # a negative hash: Kafka (Utils.abs) puts "my-group" in partition 12, not 36
    assert java_string_hash("my-group") == -1906497762
    assert partition_for("my-group", 50) == 12
    # non-ASCII: UTF-16 code units, as Java sees them
    assert java_string_hash("é") == 0xE9


def test_offset_key_and_value_layout() -> None:
    key = rec.offset_key("g", "t", 3)
    assert key == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(
        ">i", 3)
    assert rec.decode_key(key) == rec.OffsetKey("g", "t", 3)
    value = rec.offset_value(rec.OffsetValue(42, 7, "meta", 1000))
    assert value == struct.pack(">hqih", 3, 42, 7, 4) + b"meta" + struct.pack(">q", 1000)
    assert rec.decode_offset_value(value) == rec.OffsetValue(42, 7, "meta", 1000, -1)
    v1 = struct.pack(">hqh", 1, 9, 0) + struct.pack(">qq", 5, 6)
    assert rec.decode_offset_value(v1) == rec.OffsetValue(9, -1, "", 5, 6)


def test_group_value_round_trip() -> None:
    members = [rec.MemberValue("m-1", "static-1", "client", "/127.0.0.1", 300000, 10000,
                               b"sub", b"assign"),
               rec.MemberValue("m-2", None, "client", "/127.0.0.1", 300000, 10000, b"", b"")]
    value = rec.GroupValue("consumer", 4, "range", "m-1", 123, members)
    data = rec.group_value(value)
    assert data[:2] == struct.pack(">h", 3)
    assert rec.decode_group_value(data) == value
    assert rec.decode_key(rec.group_key("grp")) == rec.GroupKey("grp")
    assert rec.decode_key(struct.pack(">h", 9)) is None


def test_batches_are_valid_kafka_batches(tmp_path: Path) -> None:
    records = [(rec.offset_key("g", "t", p), rec.offset_value(rec.OffsetValue(p, -1, "", 1)))
               for p in range(3)]
    records.append((rec.group_key("g"), None))
    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"))
    log.append(rec.build_batch(records, 1234), 0, 1234)
    log.append(rec.build_batch(records[:1], 1235), 0, 1235)
    data = log.read(0, 1 << 20, min_one=True).read()
    got = list(rec.iter_records(data))
    assert [o for o, _, _ in got] == [0, 1, 2, 3, 4]
    assert [(k, v) for _, k, v in got] == records + records[:1]
    log.close()
