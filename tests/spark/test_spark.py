"""pybroker.spark with real PySpark (local[2]): batch and streaming reads, writes.

One module-scoped SparkSession and one module-scoped broker; small data. The
kill -9 test runs its streaming query in a subprocess (tests/spark/stream_job.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")
pq = pytest.importorskip("pyarrow.parquet")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Python workers run this interpreter (the one pybroker is installed in)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

import pybroker.spark  # noqa: E402
from tests.integration.helpers import create_topic  # noqa: E402

pytestmark = pytest.mark.timeout(300)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
JOB = Path(__file__).with_name("stream_job.py")


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = (SparkSession.builder.master("local[2]").appName("pybroker-tests")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    pybroker.spark.register(s)
    yield s
    s.stop()


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **conf: Any) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **conf})
    for r in records:
        p.produce(topic, key=r.get("key"), value=r.get("value"), partition=r["partition"],
                  headers=r.get("headers"))
    assert p.flush(30) == 0


def reader(spark: SparkSession, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("pybroker").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_every_codec_equals_what_was_produced(spark: SparkSession, broker: Any,
                                                         topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    expected = set()
    for i, codec in enumerate(CODECS):
        records = []
        for j in range(200):
            n = i * 1000 + j
            key = None if j % 7 == 0 else f"k{n}".encode()
            headers = [("codec", codec.encode()), ("n", None)] if j % 2 else None
            records.append({"key": key, "value": f"value-{n}".encode() * (1 + j % 3),
                            "partition": j % 3, "headers": headers})
            expected.add((key, records[-1]["value"], j % 3,
                          tuple(headers) if headers else ()))
        produce(broker.bootstrap, topic_name, records, **{"compression.type": codec})

    df = reader(spark, broker.bootstrap, subscribe=topic_name, includeHeaders="true",
                maxRecordsPerPartition="150")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
        "headers"]
    assert df.schema["timestamp"].dataType.typeName() == "timestamp"
    rows = df.collect()
    # 1000 records over 3 partitions (~333 each), split into ranges of <= 150
    assert df.rdd.getNumPartitions() == 9
    assert len(rows) == 1000
    got = {(r.key, r.value, r.partition,
            tuple((h.key, h.value) for h in r.headers or ())) for r in rows}
    assert {r.headers is None for r in rows} == {True, False}
    assert got == expected
    assert {r.topic for r in rows} == {topic_name}
    assert {r.timestampType for r in rows} == {0}
    by_part: dict[int, list[int]] = {}
    for r in rows:
        by_part.setdefault(r.partition, []).append(r.offset)
    for offsets in by_part.values():
        assert sorted(offsets) == list(range(len(offsets)))
    assert abs(rows[0].timestamp.timestamp() - time.time()) < 600

    # offsets as JSON per partition; -2 earliest, -1 latest; subscribePattern; assign
    start = json.dumps({topic_name: {"0": 10, "1": -2, "2": 5}})
    end = json.dumps({topic_name: {"0": 20, "1": 3, "2": -1}})
    df = reader(spark, broker.bootstrap, subscribePattern=topic_name.replace("-", ".") + "$",
                startingOffsets=start, endingOffsets=end)
    counts = {r.partition: r["count"] for r in df.groupBy("partition").count().collect()}
    total = {p: len(v) for p, v in by_part.items()}
    assert counts == {0: 10, 1: 3, 2: total[2] - 5}
    df = reader(spark, broker.bootstrap, assign=json.dumps({topic_name: [1]}))
    assert df.count() == total[1]
    # startingTimestamp: ListOffsets by time; after the last record there is none
    df = reader(spark, broker.bootstrap, subscribe=topic_name, startingTimestamp="0")
    assert df.count() == 1000
    future = str(int(time.time() * 1000) + 3_600_000)
    with pytest.raises(Exception, match="no offset for timestamp"):
        reader(spark, broker.bootstrap, subscribe=topic_name,
               startingTimestamp=future).collect()
    df = reader(spark, broker.bootstrap, subscribe=topic_name, startingTimestamp=future,
                startingOffsetsByTimestampStrategy="latest")
    assert df.count() == 0


def test_offsets_beyond_log_end_and_fail_on_data_loss(spark: SparkSession, broker: Any,
                                                      topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name,
            [{"value": b"x%d" % i, "partition": i % 2} for i in range(20)])
    past_end = json.dumps({topic_name: {"0": 50, "1": -1}})
    # endingOffsets past the log end: records that do not exist are data loss
    df = reader(spark, broker.bootstrap, subscribe=topic_name, endingOffsets=past_end)
    with pytest.raises(Exception, match="failOnDataLoss"):
        df.collect()
    df = reader(spark, broker.bootstrap, subscribe=topic_name, endingOffsets=past_end,
                failOnDataLoss="false")
    assert df.count() == 20
    # read_committed (Fetch isolation level 1, ListOffsets up to the last stable offset)
    df = reader(spark, broker.bootstrap, subscribe=topic_name,
                **{"kafka.isolation.level": "read_committed"})
    assert df.count() == 20
    # a starting offset after the ending offset fails a batch query either way
    for fail in ("true", "false"):
        df = reader(spark, broker.bootstrap, subscribe=topic_name, startingOffsets=past_end,
                    failOnDataLoss=fail)
        with pytest.raises(Exception, match="after the ending offset"):
            df.collect()

    # streaming from offsets past the log end: the partition's offset "went back"
    def stream(fail: str, name: str) -> Any:
        return (spark.readStream.format("pybroker")
                .option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", topic_name).option("startingOffsets", past_end)
                .option("failOnDataLoss", fail).load()
                .writeStream.format("memory").queryName(name)
                .trigger(availableNow=True).start())

    q = stream("true", "loss_fails")
    with pytest.raises(Exception, match="failOnDataLoss"):
        q.awaitTermination(120)
    q = stream("false", "loss_skips")
    q.awaitTermination(120)
    assert q.exception() is None
    # partition 0 (asked from 50, end 10) is skipped; partition 1 started at latest
    assert spark.sql("SELECT * FROM loss_skips").count() == 0


def test_log_append_time_topic_reads_timestamp_type_1(spark: SparkSession, broker: Any,
                                                      topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1,
                 config={"message.timestamp.type": "LogAppendTime"})
    produce(broker.bootstrap, topic_name, [{"value": b"x", "partition": 0}],
            **{"compression.type": "gzip"})
    (row,) = reader(spark, broker.bootstrap, subscribe=topic_name).collect()
    assert row.timestampType == 1
    assert abs(row.timestamp.timestamp() - time.time()) < 600


def test_writer_round_trip_batch_and_streaming_replay(spark: SparkSession, broker: Any,
                                                      topic_name: str,
                                                      tmp_path: Path) -> None:
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 3)
    rows = [(f"k{i}" if i % 5 else None, f"v{i}", [("h", bytes([i % 256]))]) for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value string, "
                                     "headers array<struct<key:string,value:binary>>")
    df.write.format("pybroker").mode("append") \
        .option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("topic", src).save()
    back = reader(spark, broker.bootstrap, subscribe=src, includeHeaders="true").collect()
    got = sorted((r.value.decode(), r.key and r.key.decode(), r.headers[0].value[0])
                 for r in back)
    assert got == sorted((v, k, h[0][1][0]) for k, v, h in rows)
    # keyed records land where Kafka's default partitioner puts them (murmur2):
    # the same key is always in the same partition
    parts = {}
    for r in back:
        if r.key is not None:
            assert parts.setdefault(r.key, r.partition) == r.partition

    # batch writes with queryId + batchId (foreachBatch): a repeated batch id is a no-op
    once = f"{topic_name}-once"
    for batch_id in (0, 0, 1):
        df.limit(10).write.format("pybroker").mode("append") \
            .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", once) \
            .option("queryId", "q-" + topic_name).option("batchId", str(batch_id)).save()
    assert reader(spark, broker.bootstrap, subscribe=once).count() == 20

    # streaming: src -> dst with explicit partition and topic columns
    checkpoint = tmp_path / "ckpt"

    def run_stream() -> None:
        q = (spark.readStream.format("pybroker")
             .option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", src).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "100").load()
             .selectExpr("key", "value", f"'{dst}' AS topic", "partition")
             .writeStream.format("pybroker")
             .option("kafka.bootstrap.servers", broker.bootstrap)
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)

    run_stream()
    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir()
                     if p.name.isdigit())
    assert len(commits) >= 3
    # forget the last micro-batch's commit: Spark replays it (same batch id, same data)
    (checkpoint / "commits" / str(commits[-1])).unlink()
    (checkpoint / "commits" / f".{commits[-1]}.crc").unlink(missing_ok=True)
    run_stream()
    out = reader(spark, broker.bootstrap, subscribe=dst).collect()
    assert len(out) == 300, "a replayed micro-batch was published twice"
    assert sorted(r.value.decode() for r in out) == sorted(v for _, v, _ in rows)
    assert all(r.partition in (0, 1) for r in out)


def _committed_rows(out_dir: Path) -> list[tuple[int, int]]:
    """(partition, offset) of the Parquet files the file sink's log committed (as a
    Spark reader sees them; a file half-written at kill -9 is not listed)."""
    rows: list[tuple[int, int]] = []
    meta = out_dir / "_spark_metadata"
    if not meta.exists():
        return rows
    logs = {int(p.name.split(".")[0]): p for p in meta.iterdir() if p.name[0].isdigit()}
    # a N.compact file holds every entry of batches <= N: start from the newest one
    first = max((n for n, p in logs.items() if p.name.endswith(".compact")), default=0)
    names: list[str] = []
    for n in sorted(n for n in logs if n >= first):
        for line in logs[n].read_text().splitlines()[1:]:
            entry = json.loads(line)
            name = Path(entry["path"].removeprefix("file://")).name
            if entry.get("action", "add") == "add":
                names.append(name)
    for name in names:
        t = pq.read_table(out_dir / name)
        rows += list(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(),
                         strict=True))
    return rows


def test_streaming_kill9_then_restart_from_checkpoint_exactly_once(broker: Any,
                                                                   topic_name: str,
                                                                   tmp_path: Path) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    n = 3000
    produce(broker.bootstrap, topic_name,
            [{"value": b"r%05d" % i, "partition": i % 2} for i in range(n)],
            **{"compression.type": "zstd"})
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    args = [sys.executable, str(JOB), broker.bootstrap, topic_name, str(out), str(ckpt)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(args + ["continuous"], start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # wait until a micro-batch after the first is planned (its offsets are in the
        # offset log) but not committed: the kill lands in the middle of that batch
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None:
            planned = {p.name for p in (ckpt / "offsets").glob("[0-9]*")} \
                if (ckpt / "offsets").exists() else set()
            committed = {p.name for p in (ckpt / "commits").glob("[0-9]*")} \
                if (ckpt / "commits").exists() else set()
            if committed and planned - committed:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "streaming job exited early"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    partial = _committed_rows(out)
    assert 0 < len(partial) < n, "kill -9 should land before the topic is consumed"
    subprocess.run(args + ["available-now"], env=env, check=True, timeout=240,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = _committed_rows(out)
    assert len(rows) == n
    assert sorted(rows) == sorted((i % 2, i // 2) for i in range(n))


def test_consumer_can_read_what_the_sink_wrote(broker: Any, spark: SparkSession,
                                               topic_name: str) -> None:
    """The sink's batches are plain Kafka batches: librdkafka reads them."""
    create_topic(broker.bootstrap, topic_name, 1)
    df = spark.createDataFrame([(b"k", b"v", 0)], "key binary, value binary, partition int")
    df.write.format("pybroker").mode("append") \
        .option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("topic", topic_name).save()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic_name, 0, 0)])
    msg = None
    deadline = time.monotonic() + 20
    while msg is None and time.monotonic() < deadline:
        msg = c.poll(1.0)
    c.close()
    assert msg is not None and msg.error() is None
    assert (msg.key(), msg.value()) == (b"k", b"v")
