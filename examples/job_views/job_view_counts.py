"""The Spark side of the seeds' LinkedIn example: count job views per job in
1-minute event-time windows.

* source: topic ``job-views`` through the ``pybroker`` data source (the same
  options as Spark's ``format("kafka")``);
* offline warehouse path: finished windows (closed by a 2-minute watermark) go to
  Parquet, appended once each;
* online path: running counts go back to the topic ``job-view-counts`` (key = job,
  value = JSON), updated every micro-batch.

Both queries keep their offsets in checkpoints under ``--work-dir``: stop and rerun
and they resume where they were.

    python examples/job_views/job_view_counts.py --bootstrap localhost:9092 \
        --work-dir /tmp/job-views [--available-now]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

import pybroker.spark

EVENT_SCHEMA = "member string, job string, timestamp long"


def counts(spark: SparkSession, bootstrap: str, max_per_trigger: int) -> DataFrame:
    views = (spark.readStream.format("pybroker")  # was: format("kafka")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", "job-views")
             .option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(max_per_trigger))
             .load())
    events = (views.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.job", (F.col("e.timestamp") / 1000).cast("timestamp").alias("ts")))
    return (events.withWatermark("ts", "2 minutes")
            .groupBy(F.window("ts", "1 minute").alias("window"), "job")
            .count()
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "job",
                    F.col("count").alias("views")))


def start(spark: SparkSession, bootstrap: str, work_dir: Path, available_now: bool,
          max_per_trigger: int = 1000) -> list[StreamingQuery]:
    windowed = counts(spark, bootstrap, max_per_trigger)
    warehouse = (windowed.writeStream.format("parquet").outputMode("append")
                 .option("path", str(work_dir / "warehouse" / "job_view_counts"))
                 .option("checkpointLocation", str(work_dir / "checkpoints" / "warehouse")))

    def publish(batch: DataFrame, batch_id: int) -> None:
        # Python streaming sinks only take append mode: running counts (update mode)
        # go through foreachBatch; queryId + batchId make a replayed batch a no-op.
        (batch.select(F.col("job").alias("key"),
                      F.to_json(F.struct("job", "window_start", "window_end", "views"))
                      .alias("value"))
         .write.format("pybroker").mode("append")
         .option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "job-view-counts")
         .option("queryId", "job-view-counts").option("batchId", str(batch_id))
         .save())

    online = (windowed.writeStream.outputMode("update").foreachBatch(publish)
              .option("checkpointLocation", str(work_dir / "checkpoints" / "online")))
    queries = []
    for w in (warehouse, online):
        w = w.trigger(availableNow=True) if available_now else w.trigger(
            processingTime="5 seconds")
        queries.append(w.start())
    return queries


def session() -> SparkSession:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers run this interpreter (the one pybroker is installed in)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("job-view-counts")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pybroker.spark.register(spark)
    return spark


def main() -> None:
    ap = argparse.ArgumentParser(description="job-view counts per 1-minute window")
    ap.add_argument("--bootstrap", default="localhost:9092")
    ap.add_argument("--work-dir", type=Path, default=Path("job-views-work"))
    ap.add_argument("--available-now", action="store_true",
                    help="process what is in the topic now, then stop")
    args = ap.parse_args()
    spark = session()
    for q in start(spark, args.bootstrap, args.work_dir, args.available_now):
        q.awaitTermination()


if __name__ == "__main__":
    main()
