"""The sink's exactly-once mode (``exactlyOnce=true``) with real PySpark and a real
broker: what read_committed readers see after a clean write, after a task killed
mid-write and retried, and after a streaming query killed with kill -9 and
restarted from its checkpoint (reading a transactional input read_committed).

The SparkSession is ``local[2,3]``: local mode retries a failed task only when the
master names a failure budget.
"""

from __future__ import annotations

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
pa = pytest.importorskip("pyarrow")
from confluent_kafka import Producer  # noqa: E402

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

import pybroker.spark  # noqa: E402
from tests.integration.helpers import create_topic  # noqa: E402
from pybroker.spark.client import LATEST, KafkaClient  # noqa: E402

pytestmark = pytest.mark.timeout(300)

JOB = Path(__file__).with_name("eos_stream_job.py")


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = (SparkSession.builder.master("local[2,3]").appName("pybroker-eos-tests")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    pybroker.spark.register(s)
    yield s
    s.stop()


def read(spark: SparkSession, bootstrap: str, topic: str, isolation: str) -> list[str]:
    rows = (spark.read.format("pybroker").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("kafka.isolation.level", isolation)
            .load().selectExpr("CAST(value AS STRING) AS v").collect())
    return sorted(r.v for r in rows)


def write(df: Any, bootstrap: str, topic: str, **options: str) -> None:
    w = (df.write.format("pybroker").mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("exactlyOnce", "true"))
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def test_batch_write_is_seen_once_by_read_committed(spark: SparkSession, broker: Any,
                                                    topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    values = [f"v{i:04d}" for i in range(600)]
    df = spark.createDataFrame([(f"k{i % 50}", v) for i, v in enumerate(values)],
                               "key string, value string").repartition(3)
    write(df, broker.bootstrap, topic_name)
    assert read(spark, broker.bootstrap, topic_name, "read_committed") == values
    # the records went through transactions: each partition has a COMMIT marker
    # after them, so its log end is past its last record
    with KafkaClient(broker.bootstrap) as c:
        ends = sum(c.list_offset((topic_name, p), LATEST) for p in range(3))
    assert ends > len(values)
    # foreachBatch style (queryId + batchId): a replayed batch id is skipped
    for batch_id in (0, 0, 1):
        write(df.limit(10), broker.bootstrap, topic_name, queryId="q-" + topic_name,
              batchId=str(batch_id))
    assert len(read(spark, broker.bootstrap, topic_name, "read_committed")) == 620


def test_task_killed_mid_write_leaves_no_duplicate_or_partial_batch(
        spark: SparkSession, broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    bootstrap, n = broker.bootstrap, 4000

    def rows(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        doomed = ctx.partitionId() == 1 and ctx.attemptNumber() == 0
        first_id = None
        for i, b in enumerate(batches):
            ids = b.column(0).to_pylist()
            first_id = ids[0] if first_id is None else first_id
            yield pa.RecordBatch.from_pydict({
                "key": [f"k{x % 7}" for x in ids],
                "value": [f"v{x:05d}" + "." * 400 for x in ids]})
            if doomed and i == 2:
                # die mid-write, once the writer has put some of THIS task's rows on
                # the broker (the other task's rows alone do not make it mid-write)
                _wait_for_ids_from(bootstrap, topic_name, first_id)
                os.kill(os.getpid(), signal.SIGKILL)

    df = spark.range(0, n, numPartitions=2).mapInArrow(rows, "key string, value string")
    with _arrow_batch(spark, 200):
        write(df, bootstrap, topic_name)
    committed = read(spark, bootstrap, topic_name, "read_committed")
    assert [v[:6] for v in committed] == [f"v{x:05d}" for x in range(n)]
    # the killed attempt did reach the broker: read_uncommitted sees its rows too
    assert len(read(spark, bootstrap, topic_name, "read_uncommitted")) > n


def _wait_for_ids_from(bootstrap: str, topic: str, first_id: int, timeout_s: float = 60.0) -> None:
    """Until a record whose value is `v<id>` with id >= first_id is on the broker
    (uncommitted is enough), or timeout_s passes."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{topic}",
                  "isolation.level": "read_uncommitted", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for msg in c.consume(1000, timeout=0.5):
                if msg.error() is None and int(msg.value()[1:6]) >= first_id:
                    return
    finally:
        c.close()


class _arrow_batch:  # noqa: N801 - a context manager named for what it sets
    """spark.sql.execution.arrow.maxRecordsPerBatch for the duration of a block."""

    def __init__(self, spark: SparkSession, rows: int) -> None:
        self.spark, self.rows = spark, rows

    def __enter__(self) -> None:
        self.old = self.spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
        self.spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(self.rows))

    def __exit__(self, *exc: object) -> None:
        self.spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", self.old)


def test_streaming_killed_and_restarted_from_checkpoint_does_not_duplicate(
        spark: SparkSession, broker: Any, topic_name: str, tmp_path: Path) -> None:
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    n = 3000
    # the input is transactional too, with aborted records the job (reading
    # read_committed) must not pass on
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                  "transactional.id": f"src-{topic_name}"})
    p.init_transactions(30)
    for chunk in range(3):
        p.begin_transaction()
        for i in range(chunk * 1000, (chunk + 1) * 1000):
            p.produce(src, key=b"k%d" % (i % 11), value=b"r%05d" % i, partition=i % 2)
        p.commit_transaction(30)
        p.begin_transaction()
        p.produce(src, value=b"aborted", partition=chunk % 2)
        p.flush(30)
        p.abort_transaction(30)
    ckpt = tmp_path / "ckpt"
    args = [sys.executable, str(JOB), broker.bootstrap, src, dst, str(ckpt)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(args + ["continuous"], start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # kill -9 mid-write: a micro-batch after the first is planned, not committed,
        # and some of its records are on the broker (the log end of dst moved)
        deadline = time.monotonic() + 150
        pending, end_then = None, 0
        with KafkaClient(broker.bootstrap) as c:
            while time.monotonic() < deadline and proc.poll() is None:
                planned = {q.name for q in (ckpt / "offsets").glob("[0-9]*")} \
                    if (ckpt / "offsets").exists() else set()
                done = {q.name for q in (ckpt / "commits").glob("[0-9]*")} \
                    if (ckpt / "commits").exists() else set()
                end = sum(c.list_offset((dst, part), LATEST) for part in (0, 1)) \
                    if done else 0
                if done and planned - done:
                    if pending != planned - done:
                        pending, end_then = planned - done, end
                    elif end > end_then:
                        break
                time.sleep(0.05)
        assert proc.poll() is None, "streaming job exited early"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    partial = read(spark, broker.bootstrap, dst, "read_committed")
    assert 0 < len(partial) < n, "kill -9 should land before the topic is consumed"
    subprocess.run(args + ["available-now"], env=env, check=True, timeout=240,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert [v[:6] for v in read(spark, broker.bootstrap, dst, "read_committed")] == [
        f"r{i:05d}" for i in range(n)]
