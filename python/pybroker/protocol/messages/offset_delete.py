"""OffsetDelete (key 47): delete a group's committed offsets for partitions.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=47,
    name="OffsetDelete",
    valid_versions=(0, 0),
    flexible_versions=None,
    request=[
        Field("group_id", "string", "0+"),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
            ]),
        ]),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Field("throttle_time_ms", "int32", "0+"),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)
