"""ListGroups (key 16): the groups a broker coordinates (v4: by state, v5: by type,
"classic" or "consumer").
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=16,
    name="ListGroups",
    valid_versions=(0, 5),
    flexible_versions="3+",
    request=[
        Field("states_filter", "[]string", "4+"),
        Field("types_filter", "[]string", "5+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Array("groups", "0+", [
            Field("group_id", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("group_state", "string", "4+"),
            Field("group_type", "string", "5+"),
        ]),
    ],
)
