"""PySpark data source ``pybroker``: read and write Kafka topics with no JVM connector.

Install with the ``spark`` extra (``pip install "pybroker[spark]"``), then::

    import pybroker.spark
    pybroker.spark.register(spark)
    df = (spark.read.format("pybroker")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "job-views")
          .load())

It is a drop-in for Spark's ``format("kafka")``: same columns (key, value, topic,
partition, offset, timestamp, timestampType, and headers with
``includeHeaders=true``) and the same options — ``kafka.bootstrap.servers``,
``subscribe`` / ``subscribePattern`` / ``assign``, ``startingOffsets`` /
``endingOffsets`` (``earliest``, ``latest`` or JSON ``{"topic":{"0":23,"1":-2}}``),
``startingTimestamp`` / ``endingTimestamp``, ``startingOffsetsByTimestamp`` /
``endingOffsetsByTimestamp`` (JSON of ms per partition),
``startingOffsetsByTimestampStrategy``,
``maxOffsetsPerTrigger``, ``minPartitions``, ``maxRecordsPerPartition``,
``failOnDataLoss``, ``includeHeaders``, ``kafka.isolation.level`` (read_committed
drops aborted transactions, in Rust); writes take ``topic``. Extra options:
``fetch.max.bytes`` (bytes per Fetch, 8 MiB), ``rowsPerBatch`` (rows per Arrow batch,
65536), ``sinkCommitTopic``, and for writes ``exactlyOnce`` (a Kafka transaction per
task, committed by the driver: read_committed readers see each batch once),
``transactionalIdPrefix`` and ``kafka.transaction.timeout.ms`` (see
``pybroker.spark.sink``).

Streaming reads keep offsets per partition in the checkpoint (Spark's JSON), support
``Trigger.AvailableNow`` and resume exactly where the checkpoint says. The data source
speaks the Kafka protocol itself, so it works against any Kafka broker.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``pybroker`` format on a SparkSession."""
    from pybroker.spark.source import PyBrokerDataSource

    spark.dataSource.register(PyBrokerDataSource)
