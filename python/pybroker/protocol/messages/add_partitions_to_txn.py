"""AddPartitionsToTxn (key 24): register partitions with an ongoing transaction.

Kafka's field names for v0-3 carry a ``V3AndBelow`` prefix/suffix; they are kept.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=24,
    name="AddPartitionsToTxn",
    valid_versions=(0, 3),
    flexible_versions="3+",
    request=[
        Field("v3_and_below_transactional_id", "string", "0-3"),
        Field("v3_and_below_producer_id", "int64", "0-3"),
        Field("v3_and_below_producer_epoch", "int16", "0-3"),
        Array("v3_and_below_topics", "0-3", [
            Field("name", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("results_by_topic_v3_and_below", "0-3", [
            Field("name", "string", "0+"),
            Array("results_by_partition", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("partition_error_code", "int16", "0+"),
            ]),
        ]),
    ],
)
