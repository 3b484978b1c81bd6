"""FindCoordinator (key 10): the broker coordinating a group (key_type 0) or transaction (1).
"""

from pybroker.protocol.schema import Api, Field

API = Api(
    key=10,
    name="FindCoordinator",
    valid_versions=(0, 2),
    flexible_versions="3+",
    request=[
        Field("key", "string", "0-3"),
        Field("key_type", "int8", "1+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0-3"),
        Field("error_message", "string", "1-3", nullable="1-3"),
        Field("node_id", "int32", "0-3"),
        Field("host", "string", "0-3"),
        Field("port", "int32", "0-3"),
    ],
)
