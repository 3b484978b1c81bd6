"""CreateTopics (key 19): create topics with partition counts, assignments and configs.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=19,
    name="CreateTopics",
    valid_versions=(2, 4),
    flexible_versions="5+",
    request=[
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Field("num_partitions", "int32", "0+"),
            Field("replication_factor", "int16", "0+"),
            Array("assignments", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("broker_ids", "[]int32", "0+"),
            ]),
            Array("configs", "0+", [
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            ]),
        ]),
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("validate_only", "bool", "1+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "2+"),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "1+", nullable="0+"),
        ]),
    ],
)
