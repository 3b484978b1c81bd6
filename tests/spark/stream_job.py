"""A Structured Streaming job run as a subprocess by test_spark.py (so it can be
killed with kill -9): topic -> Parquet, offsets in a checkpoint.

usage: stream_job.py BOOTSTRAP TOPIC OUT_DIR CHECKPOINT {continuous|available-now}
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Python workers run this interpreter (the one pybroker is installed in)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

import pybroker.spark  # noqa: E402


def main() -> None:
    bootstrap, topic, out_dir, checkpoint, mode = sys.argv[1:6]
    spark = (SparkSession.builder.master("local[2]").appName("pybroker-stream-job")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    pybroker.spark.register(spark)
    df = (spark.readStream.format("pybroker")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic)
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "500")
          .load()
          .selectExpr("partition", "offset", "CAST(value AS STRING) AS value"))
    writer = (df.writeStream.format("parquet").option("path", out_dir)
              .option("checkpointLocation", checkpoint))
    if mode == "available-now":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        print("STARTED", flush=True)
        writer.trigger(processingTime="200 milliseconds").start().awaitTermination()


if __name__ == "__main__":
    main()
