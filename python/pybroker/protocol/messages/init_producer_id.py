"""InitProducerId (key 22): allocate a producer id and epoch (idempotence, transactions).
"""

from pybroker.protocol.schema import Api, Field

API = Api(
    key=22,
    name="InitProducerId",
    valid_versions=(0, 1),
    flexible_versions="2+",
    request=[
        Field("transactional_id", "string", "0+", nullable="0+"),
        Field("transaction_timeout_ms", "int32", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("producer_id", "int64", "0+", default=-1),
        Field("producer_epoch", "int16", "0+"),
    ],
)
