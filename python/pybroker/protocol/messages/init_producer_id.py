"""InitProducerId (key 22): allocate a producer id and epoch (idempotence, transactions).

v3+ carry the producer's current id/epoch (KIP-360 epoch bump); v4 answers
PRODUCER_FENCED where older versions get INVALID_PRODUCER_EPOCH.
"""

from pybroker.protocol.schema import Api, Field

API = Api(
    key=22,
    name="InitProducerId",
    valid_versions=(0, 4),
    flexible_versions="2+",
    request=[
        Field("transactional_id", "string", "0+", nullable="0+"),
        Field("transaction_timeout_ms", "int32", "0+"),
        Field("producer_id", "int64", "3+", default=-1),
        Field("producer_epoch", "int16", "3+", default=-1),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("producer_id", "int64", "0+", default=-1),
        Field("producer_epoch", "int16", "0+"),
    ],
)
