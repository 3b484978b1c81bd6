"""CreateAcls (key 30): add ACL bindings; one result per creation.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=30,
    name="CreateAcls",
    valid_versions=(1, 3),
    flexible_versions="2+",
    request=[
        Array("creations", "0+", [
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("resource_pattern_type", "int8", "1+", default=3),
            Field("principal", "string", "0+"),
            Field("host", "string", "0+"),
            Field("operation", "int8", "0+"),
            Field("permission_type", "int8", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("results", "0+", [
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
        ]),
    ],
)
