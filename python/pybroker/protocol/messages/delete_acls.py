"""DeleteAcls (key 31): remove the ACL bindings matching each filter.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=31,
    name="DeleteAcls",
    valid_versions=(1, 3),
    flexible_versions="2+",
    request=[
        Array("filters", "0+", [
            Field("resource_type_filter", "int8", "0+"),
            Field("resource_name_filter", "string", "0+", nullable="0+"),
            Field("pattern_type_filter", "int8", "1+", default=3),
            Field("principal_filter", "string", "0+", nullable="0+"),
            Field("host_filter", "string", "0+", nullable="0+"),
            Field("operation", "int8", "0+"),
            Field("permission_type", "int8", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("filter_results", "0+", [
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Array("matching_acls", "0+", [
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+"),
                Field("resource_type", "int8", "0+"),
                Field("resource_name", "string", "0+"),
                Field("pattern_type", "int8", "1+", default=3),
                Field("principal", "string", "0+"),
                Field("host", "string", "0+"),
                Field("operation", "int8", "0+"),
                Field("permission_type", "int8", "0+"),
            ]),
        ]),
    ],
)
