"""The job-view pipeline end to end, in one command:

    python examples/job_views/run_demo.py [--events 5000] [--keep]

1. starts ``pybroker serve`` (a fresh data dir, a free port) and creates the topics
   ``job-views`` (2 partitions) and ``job-view-counts``;
2. the generator produces job-view events (the web front end);
3. the Spark job counts views per job in 1-minute windows (Trigger.AvailableNow):
   finished windows to Parquet, running counts to ``job-view-counts``;
4. checks the outputs against what was produced and prints the busiest jobs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generator  # noqa: E402
import job_view_counts  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "pybroker", "serve",
           "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"log.dirs={data_dir / 'broker'}"]
    log = open(data_dir / "broker.log", "wb")  # noqa: SIM115 - lives as long as the broker
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"pybroker did not start; see {data_dir / 'broker.log'}")


def main() -> None:
    ap = argparse.ArgumentParser(description="job-view pipeline demo")
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="job-views-"))
    broker, bootstrap = start_broker(work)
    print(f"pybroker serving on {bootstrap} (data in {work})")
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [NewTopic("job-views", 2, 1), NewTopic("job-view-counts", 2, 1)]
        for fut in admin.create_topics(topics).values():
            fut.result(30)

        produced = generator.generate(bootstrap, args.events, minutes=10, jobs=50, seed=7)
        print(f"generator: {args.events} job views of {len(produced)} jobs -> job-views")

        spark = job_view_counts.session()
        t = time.monotonic()
        for q in job_view_counts.start(spark, bootstrap, work, available_now=True):
            q.awaitTermination()
        print(f"spark: streaming queries done in {time.monotonic() - t:.1f} s")

        # online path: the latest running count of every (job, window)
        online = (spark.read.format("pybroker")
                  .option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", "job-view-counts").load()
                  .select(F.from_json(F.col("value").cast("string"),
                                      "job string, window_start string, views long")
                          .alias("c"))
                  .groupBy("c.job", "c.window_start").agg(F.max("c.views").alias("views"))
                  .groupBy("job").agg(F.sum("views").alias("views")))
        online_counts = {r.job: r.views for r in online.collect()}
        assert online_counts == produced, "job-view-counts disagrees with job-views"
        print(f"job-view-counts: running counts of {len(online_counts)} jobs match "
              "the events produced")

        # offline path: finished windows in Parquet
        warehouse = spark.read.parquet(str(work / "warehouse" / "job_view_counts"))
        windows = warehouse.select("window_start").distinct().count()
        print(f"warehouse: {warehouse.count()} (window, job) rows in {windows} finished "
              "1-minute windows (Parquet)")
        print("busiest jobs (offline warehouse):")
        top = (warehouse.groupBy("job").agg(F.sum("views").alias("views"))
               .orderBy(F.desc("views")).limit(5).collect())
        for r in top:
            print(f"  {r.job:10s} {r.views:6d} views")
        print(json.dumps({"events": args.events, "jobs": len(produced),
                          "finished_windows": windows}))
        spark.stop()
    finally:
        broker.terminate()
        broker.wait(15)
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
