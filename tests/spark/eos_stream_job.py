"""A streaming query run as a subprocess by test_exactly_once.py (so it can be
killed with kill -9): topic -> topic through the sink's exactly-once mode, rows slowed down.

usage: eos_stream_job.py BOOTSTRAP SRC DST CHECKPOINT {continuous|available-now}
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Python workers run this interpreter (the one pybroker is installed in)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

import pybroker.spark  # noqa: E402


def slowly(batches: Iterator[Any]) -> Iterator[Any]:
    """Rows pass through in batches of 50, 0.2 s apart, values padded to 2 KB (so
    each batch fills PySpark's 64 KiB output buffer and reaches the writer at
    once): a task's write spans several Produce requests and about a second, so a
    kill -9 can land in the middle."""
    import pyarrow as pa

    for b in batches:
        values = [v + b"." * 2000 for v in b.column(1).to_pylist()]
        yield pa.RecordBatch.from_arrays([b.column(0), pa.array(values, pa.binary())],
                                         names=["key", "value"])
        time.sleep(0.2)


def main() -> None:
    bootstrap, src, dst, checkpoint, mode = sys.argv[1:6]
    spark = (SparkSession.builder.master("local[2]").appName("pybroker-eos-job")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50").getOrCreate())
    pybroker.spark.register(spark)
    writer = (spark.readStream.format("pybroker")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", src).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed")
              .option("maxOffsetsPerTrigger", "300").load()
              .selectExpr("key", "value").mapInArrow(slowly, "key binary, value binary")
              .writeStream.format("pybroker")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", dst)
              .option("exactlyOnce", "true")
              .option("checkpointLocation", checkpoint))
    if mode == "available-now":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        writer.trigger(processingTime="200 milliseconds").start().awaitTermination()


if __name__ == "__main__":
    main()
