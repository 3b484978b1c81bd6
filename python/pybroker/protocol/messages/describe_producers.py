"""DescribeProducers (key 61): the producers with state in partitions this broker
leads (kafka-transactions.sh describe-producers, find-hanging, abort).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=61,
    name="DescribeProducers",
    valid_versions=(0, 0),
    flexible_versions="0+",
    request=[
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Field("partition_indexes", "[]int32", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+", default=None),
                Array("active_producers", "0+", [
                    Field("producer_id", "int64", "0+"),
                    Field("producer_epoch", "int32", "0+"),
                    Field("last_sequence", "int32", "0+", default=-1),
                    Field("last_timestamp", "int64", "0+", default=-1),
                    Field("coordinator_epoch", "int32", "0+"),
                    Field("current_txn_start_offset", "int64", "0+", default=-1),
                ]),
            ]),
        ]),
    ],
)
