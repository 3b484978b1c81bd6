"""SyncGroup (key 14): second phase of a rebalance; the leader hands out assignments.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=14,
    name="SyncGroup",
    valid_versions=(0, 3),
    flexible_versions="4+",
    request=[
        Field("group_id", "string", "0+"),
        Field("generation_id", "int32", "0+"),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "3+", nullable="3+"),
        Array("assignments", "0+", [
            Field("member_id", "string", "0+"),
            Field("assignment", "bytes", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("assignment", "bytes", "0+"),
    ],
)
