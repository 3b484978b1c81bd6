"""ListGroups (key 16): the groups a broker coordinates.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=16,
    name="ListGroups",
    valid_versions=(0, 2),
    flexible_versions="3+",
    request=[],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Array("groups", "0+", [
            Field("group_id", "string", "0+"),
            Field("protocol_type", "string", "0+"),
        ]),
    ],
)
