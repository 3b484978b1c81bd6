"""EndTxn (key 26): commit or abort a transaction.
"""

from pybroker.protocol.schema import Api, Field

API = Api(
    key=26,
    name="EndTxn",
    valid_versions=(0, 3),
    flexible_versions="3+",
    request=[
        Field("transactional_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("committed", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
    ],
)
