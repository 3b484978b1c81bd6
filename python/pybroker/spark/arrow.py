"""Columns decoded in Rust -> ``pyarrow.RecordBatch`` in Spark's Kafka schema.

The key, value, offset, timestamp and timestampType arrays wrap the buffers of a
``pybroker._core.RecordColumns`` without copying (``pyarrow.foreign_buffer`` keeps
the Rust object alive); topic and partition are constant per Spark partition and
built with ``pyarrow.repeat``.
"""

from __future__ import annotations

import pyarrow as pa

from pybroker._core import RecordColumns

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = ", headers array<struct<key:string,value:binary>>"


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", TIMESTAMP_TYPE),
        ("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(("headers", pa.list_(HEADER_TYPE)))
    return pa.schema(fields)


def to_record_batch(cols: RecordColumns, topic: str, partition: int,
                    schema: pa.Schema) -> pa.RecordBatch:
    n = len(cols)
    b = cols.buffers()

    def buf(name: str) -> pa.Buffer:
        address, size = b[name]
        return pa.foreign_buffer(address, size, base=cols)

    def binary(name: str, typ: pa.DataType, length: int) -> pa.Array:
        nulls = b[f"{name}_null_count"]
        validity = buf(f"{name}_validity") if nulls else None
        return pa.Array.from_buffers(typ, length, [validity, buf(f"{name}_offsets"),
                                                   buf(f"{name}_data")], null_count=nulls)

    arrays = [
        binary("key", pa.binary(), n),
        binary("value", pa.binary(), n),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.Array.from_buffers(pa.int64(), n, [None, buf("offset")], null_count=0),
        pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, buf("timestamp")], null_count=0),
        pa.Array.from_buffers(pa.int32(), n, [None, buf("timestamp_type")], null_count=0),
    ]
    if "headers_offsets" in b:
        count = b["header_count"]
        entries = pa.StructArray.from_arrays(
            [binary("header_key", pa.string(), count),
             binary("header_value", pa.binary(), count)],
            fields=list(HEADER_TYPE),
        )
        nulls = b["headers_null_count"]
        arrays.append(pa.ListArray.from_buffers(
            pa.list_(HEADER_TYPE), n,
            [buf("headers_validity") if nulls else None, buf("headers_offsets")],
            null_count=nulls, children=[entries]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
