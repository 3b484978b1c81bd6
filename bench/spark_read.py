"""Rows/s of a PySpark batch read through the ``pybroker`` data source.

Starts ``pybroker serve`` on a free port (or uses ``--bootstrap``), produces N
records of S bytes with confluent-kafka, then reads the topic into Spark
(``local[2]``, noop sink) and prints the best of ``--repeat`` timed reads.

    python bench/spark_read.py [--records 1000000] [--size 100] [--partitions 2] [--write]

``--write`` also times writing the same number of rows from a cached DataFrame
through the ``pybroker`` sink (batch write, explicit partition column).

Needs the ``spark`` and ``bench`` extras (pyspark, pyarrow, confluent-kafka) and Java.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Python workers run this interpreter (the one pybroker is installed in)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(data_dir: str, partitions: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "pybroker", "serve",
           "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"log.dirs={data_dir}",
           "--override", f"num.partitions={partitions}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("pybroker did not start")


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "acks": 1})
    value = b"x" * size
    t = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    return time.perf_counter() - t


def bench_write(spark: Any, bootstrap: str, topic: str, args: argparse.Namespace) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
        fut.result(30)
    df = spark.range(args.records).selectExpr(
        f"CAST(id % {args.partitions} AS INT) AS partition",
        f"CAST(repeat('x', {args.size}) AS BINARY) AS value").cache()
    df.count()
    best = float("inf")
    for i in range(args.repeat):
        t = time.perf_counter()
        (df.write.format("pybroker").mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())
        secs = time.perf_counter() - t
        best = min(best, secs)
        print(f"write run {i + 1}: {args.records / secs:,.0f} rows/s ({secs:.2f} s)")
    print(f"spark_write: {args.records / best:,.0f} rows/s best of {args.repeat} "
          f"({args.records} x {args.size} B, {args.partitions} partitions, local[2])")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bootstrap", help="use this broker instead of starting pybroker")
    ap.add_argument("--write", action="store_true", help="also time the sink")
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    import pybroker.spark

    tmp = tempfile.TemporaryDirectory(prefix="spark-read-bench-")
    proc = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        proc, bootstrap = start_broker(tmp.name, args.partitions)
    try:
        topic = f"spark-read-{int(time.time())}"
        secs = produce(bootstrap, topic, args.partitions, args.records, args.size)
        print(f"produced {args.records} x {args.size} B in {secs:.1f} s")
        spark = (SparkSession.builder.master("local[2]").appName("spark-read-bench")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        pybroker.spark.register(spark)
        df = (spark.read.format("pybroker").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).load())
        assert df.count() == args.records
        best = float("inf")
        for i in range(args.repeat):
            t = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            secs = time.perf_counter() - t
            best = min(best, secs)
            print(f"run {i + 1}: {args.records / secs:,.0f} rows/s ({secs:.2f} s)")
        print(f"spark_read: {args.records / best:,.0f} rows/s best of {args.repeat} "
              f"({args.records} x {args.size} B, {args.partitions} partitions, local[2], "
              f"noop sink; load average {os.getloadavg()[0]:.1f})")
        if args.write:
            bench_write(spark, bootstrap, f"{topic}-w", args)
        spark.stop()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(15)
        tmp.cleanup()


if __name__ == "__main__":
    main()
