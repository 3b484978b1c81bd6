"""WriteTxnMarkers (key 27): a transaction coordinator asks the leaders of a
transaction's partitions to write its COMMIT or ABORT marker.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=27,
    name="WriteTxnMarkers",
    valid_versions=(1, 1),  # v0 (non-flexible) was removed in Kafka 4.0
    flexible_versions="1+",
    request=[
        Array("markers", "0+", [
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Field("transaction_result", "bool", "0+"),
            Array("topics", "0+", [
                Field("name", "string", "0+"),
                Field("partition_indexes", "[]int32", "0+"),
            ]),
            Field("coordinator_epoch", "int32", "0+"),
        ]),
    ],
    response=[
        Array("markers", "0+", [
            Field("producer_id", "int64", "0+"),
            Array("topics", "0+", [
                Field("name", "string", "0+"),
                Array("partitions", "0+", [
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                ]),
            ]),
        ]),
    ],
)
