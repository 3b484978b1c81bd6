"""DescribeClientQuotas (key 48): quota configs of users, client ids and their pairs
matching a filter (match_type 0 exact, 1 default, 2 any).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=48,
    name="DescribeClientQuotas",
    valid_versions=(0, 1),
    flexible_versions="1+",
    request=[
        Array("components", "0+", [
            Field("entity_type", "string", "0+"),
            Field("match_type", "int8", "0+"),
            Field("match", "string", "0+", nullable="0+"),
        ]),
        Field("strict", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Array("entries", "0+", [
            Array("entity", "0+", [
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            ]),
            Array("values", "0+", [
                Field("key", "string", "0+"),
                Field("value", "float64", "0+"),
            ]),
        ], nullable="0+"),
    ],
)
