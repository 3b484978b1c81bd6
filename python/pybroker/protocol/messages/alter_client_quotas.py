"""AlterClientQuotas (key 49): set or remove quota configs (producer_byte_rate,
consumer_byte_rate, request_percentage) of users, client ids and their pairs.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=49,
    name="AlterClientQuotas",
    valid_versions=(0, 1),
    flexible_versions="1+",
    request=[
        Array("entries", "0+", [
            Array("entity", "0+", [
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            ]),
            Array("ops", "0+", [
                Field("key", "string", "0+"),
                Field("value", "float64", "0+"),
                Field("remove", "bool", "0+"),
            ]),
        ]),
        Field("validate_only", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("entries", "0+", [
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Array("entity", "0+", [
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
)
