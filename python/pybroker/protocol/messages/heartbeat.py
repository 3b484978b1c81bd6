"""Heartbeat (key 12): a member's liveness signal to its group coordinator.
"""

from pybroker.protocol.schema import Api, Field

API = Api(
    key=12,
    name="Heartbeat",
    valid_versions=(0, 3),
    flexible_versions="4+",
    request=[
        Field("group_id", "string", "0+"),
        Field("generation_id", "int32", "0+"),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "3+", nullable="3+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
    ],
)
