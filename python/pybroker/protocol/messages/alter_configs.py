"""AlterConfigs (key 33): replace the configuration of topics and brokers.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=33,
    name="AlterConfigs",
    valid_versions=(0, 1),
    flexible_versions="2+",
    request=[
        Array("resources", "0+", [
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Array("configs", "0+", [
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            ]),
        ]),
        Field("validate_only", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("responses", "0+", [
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
        ]),
    ],
)
