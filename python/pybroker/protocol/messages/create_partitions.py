"""CreatePartitions (key 37): add partitions to topics.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=37,
    name="CreatePartitions",
    valid_versions=(0, 1),
    flexible_versions="2+",
    request=[
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Field("count", "int32", "0+"),
            Array("assignments", "0+", [
                Field("broker_ids", "[]int32", "0+"),
            ], nullable="0+"),
        ]),
        Field("timeout_ms", "int32", "0+"),
        Field("validate_only", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("results", "0+", [
            Field("name", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
        ]),
    ],
)
