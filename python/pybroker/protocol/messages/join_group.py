"""JoinGroup (key 11): first phase of a group rebalance.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=11,
    name="JoinGroup",
    valid_versions=(0, 5),
    flexible_versions="6+",
    request=[
        Field("group_id", "string", "0+"),
        Field("session_timeout_ms", "int32", "0+"),
        Field("rebalance_timeout_ms", "int32", "1+", default=-1),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "5+", nullable="5+"),
        Field("protocol_type", "string", "0+"),
        Array("protocols", "0+", [
            Field("name", "string", "0+"),
            Field("metadata", "bytes", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "2+"),
        Field("error_code", "int16", "0+"),
        Field("generation_id", "int32", "0+", default=-1),
        Field("protocol_name", "string", "0+"),
        Field("leader", "string", "0+"),
        Field("member_id", "string", "0+"),
        Array("members", "0+", [
            Field("member_id", "string", "0+"),
            Field("group_instance_id", "string", "5+", nullable="5+"),
            Field("metadata", "bytes", "0+"),
        ]),
    ],
)
