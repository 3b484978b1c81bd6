"""DeleteGroups (key 42): delete empty consumer groups.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=42,
    name="DeleteGroups",
    valid_versions=(0, 1),
    flexible_versions="2+",
    request=[
        Field("groups_names", "[]string", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("results", "0+", [
            Field("group_id", "string", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
    ],
)
