"""DescribeGroups (key 15): state and members of groups.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=15,
    name="DescribeGroups",
    valid_versions=(0, 4),
    flexible_versions="5+",
    request=[
        Field("groups", "[]string", "0+"),
        Field("include_authorized_operations", "bool", "3+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Array("groups", "0+", [
            Field("error_code", "int16", "0+"),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("protocol_data", "string", "0+"),
            Array("members", "0+", [
                Field("member_id", "string", "0+"),
                Field("group_instance_id", "string", "4+", nullable="4+"),
                Field("client_id", "string", "0+"),
                Field("client_host", "string", "0+"),
                Field("member_metadata", "bytes", "0+"),
                Field("member_assignment", "bytes", "0+"),
            ]),
            Field("authorized_operations", "int32", "3+", default=-2147483648),
        ]),
    ],
)
