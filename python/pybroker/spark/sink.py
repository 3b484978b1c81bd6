"""The ``pybroker`` Spark sink: batch and streaming writes to Kafka topics.

Input columns as Spark's Kafka sink takes them: ``value`` (string or binary,
required), ``key`` (string or binary, optional), ``topic`` (string; the ``topic``
option, when set, overrides it), ``partition`` (int, optional: else Kafka's default
partitioner — murmur2 of the key, null keys spread per Arrow batch) and ``headers``
(array<struct<key:string,value:binary>>, optional). Rows are grouped per partition
and cut into ~512 KiB batches with numpy/pyarrow, encoded as uncompressed v2 batches
in Rust straight from the Arrow buffers (``pybroker._core.build_batch_arrow``; rows
with headers go through ``build_batch``) and sent with Produce (acks=all) through
``pybroker.spark.client``. The sink needs ``mode("append")`` for batch writes (Python
data sources reject Spark's default ErrorIfExists).

Streaming writes are idempotent per micro-batch id. Spark replays a micro-batch
(same id, same data) when it crashed before writing its commit log, and calls
``commit(batchId)`` again. Markers in a small compacted topic
(``_pybroker_spark_sinks``, option ``sinkCommitTopic``) record what is published:

* after all tasks of batch B of query Q succeeded, ``commit`` writes
  ``Q -> B``;
* each task, after its Produce calls were acknowledged, writes
  ``Q/<task partition id> -> B``.

A task of batch B skips publishing when ``Q -> B' `` or ``Q/<id> -> B'`` with
B' >= B exists, so a replayed batch (or a retried task that had finished) is not
published twice. Q is Spark's query id (``sql.streaming.queryId``, stable across
restarts from the same checkpoint) and B comes from the task's local property
``streaming.sql.batchId``. The one window left is a task that dies after the broker
acknowledged its records and before its own marker: its records of that batch are
published again (at-least-once for that task), as with any non-transactional
Kafka producer.

Exactly-once mode (option ``exactlyOnce=true``; batch and streaming) closes that
window with Kafka transactions, one per task. Each task's writer

1. sends InitProducerId for the transactional id ``<prefix>-<task partition id>``
   (prefix: option ``transactionalIdPrefix``, else ``pybroker-spark-<Q>`` with Q the
   streaming query id or the ``queryId`` option, else a random id per batch write
   job). The epoch bump fences a retried task's zombie and aborts what it left open;
2. skips the batch, as above, if the markers say it was published (markers are read
   committed-only, see ``pybroker.spark.txn``);
3. adds each partition to the transaction (AddPartitionsToTxn) before producing to it,
   produces its rows and then its marker ``Q/<id> -> B`` *in the same transaction*;
4. returns without ending the transaction: the commit message carries its
   (transactional id, producer id, epoch).

The driver's ``commit`` then sends EndTxn(commit) for every task's transaction and
writes ``Q -> B``; ``abort`` (a task failed for good) aborts them. So a
read_committed reader (``kafka.isolation.level=read_committed``) sees a batch only
once every task of it succeeded, and never a killed attempt's records (its retry's
InitProducerId aborted them); a task's rows and its marker commit together, so a
replayed batch skips exactly the tasks whose transactions committed and rewrites the
rest. End to end, with Spark's offsets in the checkpoint and a deterministic query
(a replayed micro-batch has the same rows in the same task partitions), every input
row is in the output topic once for read_committed readers. Limits: read_uncommitted
readers see aborted attempts too; the driver commits the tasks' transactions one by
one, so a read_committed reader can see part of a batch for the few milliseconds of
that loop, and if the driver dies inside it until the restarted query replays the
batch (a batch write without ``queryId`` is not replayed: it stays partly committed,
the rest aborted at its timeout); a task's transaction stays open until the driver
commits it, so the batch must finish within ``kafka.transaction.timeout.ms``
(default 60000, capped by the broker's ``transaction.max.timeout.ms``) or its commit
fails and the batch is written again; and speculative execution makes two attempts
fence each other (the batch then fails and is replayed). The open transactions also
hold back the last stable offset of every partition they touch until the driver
commits, as any Kafka transaction does.

Spark lets Python streaming sinks run in the ``append`` output mode only. For
``update``/``complete`` (running aggregates), write each micro-batch from
``foreachBatch`` with the batch writer and the options ``queryId`` (any stable name)
and ``batchId`` (the micro-batch id): the same markers make it idempotent per batch.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from pybroker._core import build_batch, build_batch_arrow, key_partitions
from pybroker.spark.client import KafkaClient, TopicPartition
from pybroker.spark.txn import TaskTransaction, TxnHandle, end_all, read_marker_records

try:  # Spark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamBase
    _STREAM_ARROW = True
except ImportError:  # pragma: no cover
    _StreamBase = DataSourceStreamWriter  # type: ignore[misc,assignment]
    _STREAM_ARROW = False

BATCH_BYTES_MAX = 512 << 10
RECORD_OVERHEAD_BYTES = 24
MARKER_TOPIC_DEFAULT = "_pybroker_spark_sinks"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
TXN_TIMEOUT_MS_DEFAULT = 60000  # Kafka producer's transaction.timeout.ms
TXN_PREFIX = "pybroker-spark-"


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    marker_topic: str
    columns: tuple[str, ...]
    query_id: str | None = None
    batch_id: int | None = None
    exactly_once: bool = False
    txn_prefix: str | None = None
    txn_timeout_ms: int = TXN_TIMEOUT_MS_DEFAULT

    @staticmethod
    def parse(options: Any, schema: StructType) -> SinkOptions:
        bootstrap = options.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise ValueError("option 'kafka.bootstrap.servers' must be specified")
        columns = tuple(f.name for f in schema.fields)
        if "value" not in columns:
            raise ValueError("required attribute 'value' not found")
        topic = options.get("topic")
        if topic is None and "topic" not in columns:
            raise ValueError("topic option required when no 'topic' attribute is present")
        query_id, batch_id = options.get("queryId"), options.get("batchId")
        if (query_id is None) != (batch_id is None):
            raise ValueError("options 'queryId' and 'batchId' go together")
        exactly_once = (options.get("exactlyOnce") or "false").lower()
        if exactly_once not in ("true", "false"):
            raise ValueError(f"exactlyOnce {exactly_once!r}: true or false")
        timeout = options.get("kafka.transaction.timeout.ms")
        return SinkOptions(bootstrap, topic,
                           options.get("sinkCommitTopic") or MARKER_TOPIC_DEFAULT, columns,
                           query_id, None if batch_id is None else int(batch_id),
                           exactly_once == "true", options.get("transactionalIdPrefix"),
                           TXN_TIMEOUT_MS_DEFAULT if timeout is None else int(timeout))

    def transactional_id(self, query_id: str | None, task_id: int) -> str:
        prefix = self.txn_prefix or TXN_PREFIX + (query_id or "")
        return f"{prefix}-{task_id}"


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int
    skipped: bool = False
    query_id: str | None = None
    #: exactly-once mode: the task's open transaction, for the driver to end
    txn: TxnHandle | None = None


def _binary(batch: pa.RecordBatch, name: str) -> pa.Array:
    col = batch.column(name)
    if not pa.types.is_binary(col.type):
        col = pc.cast(col, pa.binary())  # string -> binary is zero-copy
    return col


def _buffers(a: pa.Array) -> tuple[Any, Any, Any, int, int]:
    """(validity or None, offsets, data, offset, length) of a binary array."""
    validity, offsets, data = a.buffers()
    return validity, offsets, data if data is not None else b"", a.offset, len(a)


def _headers(batch: pa.RecordBatch) -> list[list[tuple[str, bytes | None]] | None] | None:
    if "headers" not in batch.schema.names:
        return None
    return [None if hs is None else [(h["key"], h["value"]) for h in hs]
            for hs in batch.column("headers").to_pylist()]


class _Producer:
    """Routes records to partitions and sends them in bounded batches. Grouping
    and sizing are vectorized (numpy / pyarrow); batches are encoded in Rust."""

    def __init__(self, opts: SinkOptions, task_id: int,
                 txn: TaskTransaction | None = None) -> None:
        self.opts = opts
        self.txn = txn
        self.client = txn.client if txn is not None else KafkaClient(
            opts.bootstrap_servers, client_id="pybroker-spark-writer")
        self.sticky = task_id
        self.count = 0

    def send(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self.opts.topic is not None:
            self._send_topic(self.opts.topic, batch)
        else:
            topics = batch.column("topic")
            if topics.null_count:
                raise ValueError("null topic present in the data; use the topic option")
            for topic in sorted(pc.unique(topics).to_pylist()):
                self._send_topic(topic, batch.filter(pc.equal(topics, topic)))
        self.count += batch.num_rows

    def _send_topic(self, topic: str, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        names = batch.schema.names
        count = len(self.client.partitions_for(topic, auto_create=True))
        values = _binary(batch, "value")
        keys = _binary(batch, "key") if "key" in names else None
        self.sticky += 1
        parts = np.full(n, self.sticky % count, dtype=np.int64)
        if keys is not None and keys.null_count < n:
            hashed = np.asarray(key_partitions(keys.to_pylist(), count), dtype=np.int64)
            parts = np.where(hashed >= 0, hashed, parts)
        if "partition" in names:
            given = batch.column("partition")
            explicit = pc.fill_null(given, -1).to_numpy(zero_copy_only=False)
            parts = np.where(explicit >= 0, explicit, parts)
        sizes = pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False)
        if keys is not None:
            sizes = sizes + pc.fill_null(pc.binary_length(keys), 0).to_numpy(
                zero_copy_only=False)
        sizes = sizes.astype(np.int64) + RECORD_OVERHEAD_BYTES
        headers = _headers(batch)
        order = np.argsort(parts, kind="stable")
        bounds = np.flatnonzero(np.diff(parts[order])) + 1
        now_ms = int(time.time() * 1000)
        out: dict[TopicPartition, list[bytes]] = {}
        for idx in np.split(order, bounds):
            # chunks of about BATCH_BYTES_MAX: cut where the running size crosses a multiple
            chunk_of = np.cumsum(sizes[idx]) // BATCH_BYTES_MAX
            for chunk in np.split(idx, np.flatnonzero(np.diff(chunk_of)) + 1):
                take = pa.array(chunk)
                if headers is None:
                    encoded = build_batch_arrow(
                        _buffers(values.take(take)), now_ms,
                        None if keys is None else _buffers(keys.take(take)))
                else:
                    encoded = build_batch(
                        [None] * len(chunk) if keys is None else keys.take(take).to_pylist(),
                        values.take(take).to_pylist(), now_ms, [headers[i] for i in chunk])
                out.setdefault((topic, int(parts[chunk[0]])), []).append(encoded)
        if self.txn is not None:
            self.txn.produce(out)
        else:
            self.client.produce(out)

    def close(self) -> None:
        if self.txn is None:  # a transaction's client belongs to its caller
            self.client.close()


def _write_all(opts: SinkOptions, batches: Iterable[pa.RecordBatch], task_id: int,
               txn: TaskTransaction | None = None) -> int:
    producer = _Producer(opts, task_id, txn)
    try:
        for b in batches:
            producer.send(b)
        return producer.count
    finally:
        producer.close()



# -- streaming: markers ------------------------------------------------------------
def read_markers(client: KafkaClient, topic: str) -> dict[str, int]:
    """The latest committed value of every marker key (the marker topic is small)."""
    out: dict[str, int] = {}
    for p in client.partitions_for(topic):
        for k, v in read_marker_records(client, (topic, p)):
            out[k.decode()] = json.loads(v)["batch_id"]
    return out


def _marker_batch(key: str, batch_id: int) -> bytes:
    value = json.dumps({"batch_id": batch_id, "time_ms": int(time.time() * 1000)}).encode()
    return build_batch([key.encode()], [value], int(time.time() * 1000))


def write_marker(client: KafkaClient, topic: str, key: str, batch_id: int) -> None:
    client.produce({(topic, 0): [_marker_batch(key, batch_id)]})


def ensure_marker_topic(client: KafkaClient, topic: str) -> None:
    client.create_topic(topic, 1, {"cleanup.policy": "compact"})


def _write_once(opts: SinkOptions, batches: Iterable[pa.RecordBatch], task_id: int,
                query_id: str, batch_id: int) -> KafkaCommitMessage:
    """Publish one task's rows of batch ``batch_id`` unless markers say they were."""
    task_key = f"{query_id}/{task_id}"
    with KafkaClient(opts.bootstrap_servers) as client:
        done = read_markers(client, opts.marker_topic)
        if max(done.get(query_id, -1), done.get(task_key, -1)) >= batch_id:
            for _ in batches:  # drain: the batch was published before
                pass
            return KafkaCommitMessage(0, skipped=True, query_id=query_id)
        count = _write_all(opts, batches, task_id)
        write_marker(client, opts.marker_topic, task_key, batch_id)
    return KafkaCommitMessage(count, query_id=query_id)


def _write_txn(opts: SinkOptions, batches: Iterable[pa.RecordBatch], task_id: int,
               query_id: str | None, batch_id: int | None) -> KafkaCommitMessage:
    """Exactly-once mode: this task's rows (and marker) in one transaction that the
    driver ends (see the module doc)."""
    with KafkaClient(opts.bootstrap_servers, client_id="pybroker-spark-writer") as client:
        txn = TaskTransaction.begin(client, opts.transactional_id(query_id, task_id),
                                    opts.txn_timeout_ms)
        if query_id is not None and batch_id is not None:
            task_key = f"{query_id}/{task_id}"
            done = read_markers(client, opts.marker_topic)
            if max(done.get(query_id, -1), done.get(task_key, -1)) >= batch_id:
                for _ in batches:  # drain: the batch was published before
                    pass
                return KafkaCommitMessage(0, skipped=True, query_id=query_id)
        try:
            count = _write_all(opts, batches, task_id, txn)
            if query_id is not None and batch_id is not None:
                txn.produce({(opts.marker_topic, 0): [_marker_batch(task_key, batch_id)]})
        except BaseException:
            # do not leave the failed attempt's transaction holding readers back
            # until its timeout (a retry's InitProducerId would abort it too)
            end_all(client, [txn.handle] if txn.partitions else [], commit=False)
            raise
        # a transaction without partitions has nothing to end (Kafka refuses EndTxn)
        return KafkaCommitMessage(count, query_id=query_id,
                                  txn=txn.handle if txn.partitions else None)


def _txn_handles(messages: list[WriterCommitMessage | None]) -> list[TxnHandle]:
    return [m.txn for m in messages if isinstance(m, KafkaCommitMessage) and m.txn]


def _commit(opts: SinkOptions, messages: list[WriterCommitMessage | None],
            batch_id: int | None) -> None:
    """Driver side: commit the tasks' transactions, then mark the batch done."""
    handles = _txn_handles(messages)
    query_ids = {m.query_id for m in messages
                 if isinstance(m, KafkaCommitMessage) and m.query_id}
    if not handles and (batch_id is None or not query_ids):
        return
    with KafkaClient(opts.bootstrap_servers) as client:
        end_all(client, handles, commit=True)
        if batch_id is not None:
            for q in query_ids:
                write_marker(client, opts.marker_topic, q, batch_id)


def _abort(opts: SinkOptions, messages: list[WriterCommitMessage | None]) -> None:
    handles = _txn_handles(messages)
    if handles:
        with KafkaClient(opts.bootstrap_servers) as client:
            end_all(client, handles, commit=False)


class KafkaBatchWriter(DataSourceArrowWriter):
    """Batch writes; with options ``queryId`` + ``batchId`` (e.g. inside
    ``foreachBatch``) idempotent per batch id like the streaming sink."""

    def __init__(self, opts: SinkOptions) -> None:
        if opts.exactly_once and opts.txn_prefix is None and opts.query_id is None:
            # one job: its retried tasks share ids (fencing), other jobs do not
            opts = replace(opts, txn_prefix=TXN_PREFIX + uuid.uuid4().hex)
        self.opts = opts
        if opts.query_id is not None:
            with KafkaClient(opts.bootstrap_servers) as client:
                ensure_marker_topic(client, opts.marker_topic)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        ctx = TaskContext.get()
        task_id = ctx.partitionId() if ctx else 0
        if self.opts.exactly_once:
            return _write_txn(self.opts, iterator, task_id, self.opts.query_id,
                              self.opts.batch_id)
        if self.opts.query_id is None or self.opts.batch_id is None:
            return KafkaCommitMessage(_write_all(self.opts, iterator, task_id))
        return _write_once(self.opts, iterator, task_id, self.opts.query_id,
                           self.opts.batch_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _commit(self.opts, messages, self.opts.batch_id)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _abort(self.opts, messages)


class KafkaStreamWriter(_StreamBase):  # type: ignore[misc,valid-type]
    """Streaming sink, idempotent per micro-batch id (see the module doc)."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        with KafkaClient(opts.bootstrap_servers) as client:
            ensure_marker_topic(client, opts.marker_topic)

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        ctx = TaskContext.get()
        task_id = ctx.partitionId() if ctx else 0
        batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx else None
        query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx else None
        batches = iterator if _STREAM_ARROW else _rows_to_batches(iterator)
        if self.opts.exactly_once:
            return _write_txn(self.opts, batches, task_id, query_id,
                              None if batch_id is None else int(batch_id))
        if batch_id is None or query_id is None:
            return KafkaCommitMessage(_write_all(self.opts, batches, task_id))
        return _write_once(self.opts, batches, task_id, query_id, int(batch_id))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _commit(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _abort(self.opts, messages)


def _rows_to_batches(rows: Iterator[Any]) -> Iterator[pa.RecordBatch]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        d = row.asDict(recursive=True)
        for k in ("key", "value"):
            if isinstance(d.get(k), str):
                d[k] = d[k].encode()
            elif isinstance(d.get(k), bytearray):
                d[k] = bytes(d[k])
        chunk.append(d)
        if len(chunk) >= 4096:
            yield pa.RecordBatch.from_pylist(chunk)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk)
