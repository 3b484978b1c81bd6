"""DescribeTransactions (key 65): the state of transactional ids on their coordinator.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=65,
    name="DescribeTransactions",
    valid_versions=(0, 0),
    flexible_versions="0+",
    request=[
        Field("transactional_ids", "[]string", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("transaction_states", "0+", [
            Field("error_code", "int16", "0+"),
            Field("transactional_id", "string", "0+"),
            Field("transaction_state", "string", "0+"),
            Field("transaction_timeout_ms", "int32", "0+"),
            Field("transaction_start_time_ms", "int64", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Array("topics", "0+", [
                Field("topic", "string", "0+"),
                Field("partitions", "[]int32", "0+"),
            ]),
        ]),
    ],
)
