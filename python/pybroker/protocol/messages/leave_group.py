"""LeaveGroup (key 13): members leave a group (a batch of members from v3).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=13,
    name="LeaveGroup",
    valid_versions=(0, 3),
    flexible_versions="4+",
    request=[
        Field("group_id", "string", "0+"),
        Field("member_id", "string", "0-2"),
        Array("members", "3+", [
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable="3+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Array("members", "3+", [
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable="3+"),
            Field("error_code", "int16", "3+"),
        ]),
    ],
)
