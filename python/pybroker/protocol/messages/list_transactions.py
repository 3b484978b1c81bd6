"""ListTransactions (key 66): the transactional ids a broker coordinates, filtered by
state and producer id (v1: by duration, KIP-994).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=66,
    name="ListTransactions",
    valid_versions=(0, 1),
    flexible_versions="0+",
    request=[
        Field("state_filters", "[]string", "0+"),
        Field("producer_id_filters", "[]int64", "0+"),
        Field("duration_filter", "int64", "1+", default=-1),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("unknown_state_filters", "[]string", "0+"),
        Array("transaction_states", "0+", [
            Field("transactional_id", "string", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("transaction_state", "string", "0+"),
        ]),
    ],
)
