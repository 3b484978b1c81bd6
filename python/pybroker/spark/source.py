"""The ``pybroker`` Spark data source: batch and streaming reads of Kafka topics.

Same output schema and options as Spark's Kafka source (see ``pybroker.spark``).
Planning (driver) resolves offsets with Metadata + ListOffsets; each Spark task
reads one offset range of one topic partition with Fetch, and Rust decodes the
fetched batches into Arrow buffers (``pybroker._core.decode_columns``): no Python
runs per record.

Data loss, as Spark's Kafka source handles it:

* a range whose start lies below the partition's log start (retention, deleted
  records): ``failOnDataLoss=true`` fails the task, ``false`` skips to the log start;
* a range reaching past the log end (the log was truncated, the topic recreated, or
  ``endingOffsets`` names offsets not written yet): ``true`` fails, ``false``
  returns what exists;
* streaming: a partition whose latest offset went *below* the offset already
  reached fails the query, or with ``false`` is skipped and resumes from there;
* batch: a starting offset after the ending offset always fails (Spark asserts).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from pybroker._core import decode_columns
from pybroker.spark.arrow import HEADERS_DDL, SCHEMA_DDL, arrow_schema, to_record_batch
from pybroker.spark.client import (
    EARLIEST,
    LATEST,
    OFFSET_OUT_OF_RANGE,
    KafkaClient,
)
from pybroker.spark.options import (
    OffsetsJson,
    PartitionOffsets,
    SourceOptions,
    data_loss,
    from_json,
    split_ranges,
    to_json,
)

try:  # Spark >= 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - Spark 4.0 / 4.1
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


EMPTY_FETCH_RETRIES = 50


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task: records [start, end) of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int


def read_range(opts: SourceOptions, part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """Fetch and decode records [start, end) of one partition as Arrow batches."""
    schema = arrow_schema(opts.include_headers)
    tp = (part.topic, part.partition)
    offset, end = part.start, part.end
    empty = 0
    with opts.client("pybroker-spark-reader") as client:
        while offset < end:
            r = client.fetch(tp, offset, opts.fetch_bytes)
            if r.error_code == OFFSET_OUT_OF_RANGE:
                earliest, latest = client.offset_range(tp)
                if offset < earliest:
                    data_loss(opts.fail_on_data_loss,
                              f"Cannot fetch offset {offset} of {tp[0]}-{tp[1]} "
                              f"(available: [{earliest}, {latest}))")
                    offset = earliest
                    continue
                data_loss(opts.fail_on_data_loss,
                          f"Cannot fetch offset {offset} of {tp[0]}-{tp[1]}: records in "
                          f"[{offset}, {end}) are past the log end {latest}")
                return
            progressed = False
            while offset < end:
                cols = decode_columns(r.records, offset, end,
                                      include_headers=opts.include_headers,
                                      max_rows=opts.rows_per_batch, aborted=r.aborted)
                if len(cols):
                    yield to_record_batch(cols, tp[0], tp[1], schema)
                if cols.next_offset <= offset:
                    break
                offset = cols.next_offset
                progressed = True
            if progressed:
                empty = 0
                continue
            if offset >= r.readable_end:
                data_loss(opts.fail_on_data_loss,
                          f"Cannot fetch offset {offset} of {tp[0]}-{tp[1]}: records in "
                          f"[{offset}, {end}) are past the readable end {r.readable_end}")
                return
            empty += 1
            if empty > EMPTY_FETCH_RETRIES:
                raise TimeoutError(f"no records at offset {offset} of {tp[0]}-{tp[1]} "
                                   f"below {r.readable_end}")
            time.sleep(0.05)


def _ranges(opts: SourceOptions, start: PartitionOffsets,
            end: PartitionOffsets) -> list[KafkaInputPartition]:
    pieces = split_ranges([(tp, start[tp], end[tp]) for tp in sorted(end) if tp in start],
                          opts.min_partitions, opts.max_records_per_partition)
    return [KafkaInputPartition(tp[0], tp[1], s, e) for tp, s, e in pieces if e > s]


class KafkaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[KafkaInputPartition]:
        opts = self.opts
        with opts.client() as client:
            tps = opts.topic_partitions(client)
            start = opts.resolve(client, tps, starting=True, default=EARLIEST)
            end = opts.resolve(client, tps, starting=False, default=LATEST)
        for tp in tps:
            if start[tp] > end[tp]:
                raise ValueError(
                    f"Beginning offset {start[tp]} is after the ending offset {end[tp]} for "
                    f"topic {tp[0]} partition {tp[1]}. You either provided an invalid "
                    "fromOffset, or the Kafka topic has been damaged")
        return _ranges(opts, start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark reads one placeholder partition when none was planned
        return read_range(self.opts, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are Spark's Kafka source JSON: ``{"topic": {"0": 23}}``."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._client: KafkaClient | None = None
        self._available_now: PartitionOffsets | None = None
        # the last end offsets handed to Spark: the start of the next batch, for
        # Spark < 4.2 whose latestOffset() gets no start
        self._last_end: OffsetsJson | None = None

    def __getstate__(self) -> dict[str, Any]:
        # executors get a copy for read(): without the driver's open connection
        return {**self.__dict__, "_client": None}

    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = self.opts.client()
        return self._client

    def _latest(self) -> PartitionOffsets:
        client = self.client()
        tps = self.opts.topic_partitions(client)
        return {tp: client.list_offset(tp, LATEST) for tp in tps}

    def initialOffset(self) -> OffsetsJson:
        client = self.client()
        tps = self.opts.topic_partitions(client)
        self._last_end = to_json(self.opts.resolve(client, tps, starting=True,
                                                   default=LATEST))
        return self._last_end

    def getDefaultReadLimit(self) -> Any:
        n = self.opts.max_offsets_per_trigger
        if n is not None and ReadMaxRows is not None:
            return ReadMaxRows(n)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._latest()

    def latestOffset(self, start: OffsetsJson | None = None,
                     limit: Any = None) -> OffsetsJson:
        latest = self._available_now if self._available_now is not None else self._latest()
        if start is None:
            start = self._last_end
        if start is None:
            return to_json(latest)
        begin = from_json(start)
        max_rows: int | None
        if limit is None:  # Spark < 4.2 passes neither start nor limit
            max_rows = self.opts.max_offsets_per_trigger
        elif ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        else:
            max_rows = None
        client = self.client()
        for tp in latest:  # a partition added since the start: from its earliest
            if tp not in begin:
                begin[tp] = client.list_offset(tp, EARLIEST)
        end = dict(latest)
        if max_rows is not None:
            end = _rate_limit(begin, latest, max_rows)
        self._last_end = to_json(end)
        return self._last_end

    def partitions(self, start: OffsetsJson, end: OffsetsJson) -> list[KafkaInputPartition]:
        begin, until = from_json(start), from_json(end)
        self._last_end = end
        client = self.client()
        for tp in until:
            if tp not in begin:
                begin[tp] = client.list_offset(tp, EARLIEST)
        for tp in sorted(until):
            if until[tp] < begin[tp]:
                data_loss(self.opts.fail_on_data_loss,
                          f"Partition {tp[0]}-{tp[1]}'s offset was changed from "
                          f"{begin[tp]} to {until[tp]}, some data may have been missed")
        return _ranges(self.opts, begin, until)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark reads one placeholder partition when none was planned
        return read_range(self.opts, partition)

    def commit(self, end: OffsetsJson) -> None:
        pass

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _rate_limit(begin: PartitionOffsets, latest: PartitionOffsets,
                limit: int) -> PartitionOffsets:
    """At most ``limit`` records in all, shared in proportion to each partition's
    backlog (small backlogs get at least one), as Spark's maxOffsetsPerTrigger."""
    sizes = {tp: max(0, latest[tp] - begin[tp]) for tp in latest}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, size in sizes.items():
        share = limit * size / total
        take = int(share) if share >= 1 else (1 if size else 0)
        out[tp] = min(latest[tp], begin[tp] + take) if size else latest[tp]
    return out


class PyBrokerDataSource(DataSource):
    """``spark.read.format("pybroker")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "pybroker"

    def schema(self) -> str:
        headers = (self.options.get("includeHeaders") or "").strip().lower() == "true"
        return SCHEMA_DDL + (HEADERS_DDL if headers else "")

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(SourceOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pybroker.spark.sink import KafkaBatchWriter, SinkOptions

        return KafkaBatchWriter(SinkOptions.parse(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pybroker.spark.sink import KafkaStreamWriter, SinkOptions

        return KafkaStreamWriter(SinkOptions.parse(self.options, schema))
