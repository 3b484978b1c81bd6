"""OffsetFetch (key 9): read a group's committed offsets (null topics = all, v2+).

v8 asks for many groups at once; v9 adds a KIP-848 member's id and epoch, checked
against the group (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
"""

from pybroker.protocol.schema import Api, Array, Field

_PARTITION = [
    Field("partition_index", "int32", "0+"),
    Field("committed_offset", "int64", "0+"),
    Field("committed_leader_epoch", "int32", "5+", default=-1),
    Field("metadata", "string", "0+", nullable="0+"),
    Field("error_code", "int16", "0+"),
]

API = Api(
    key=9,
    name="OffsetFetch",
    valid_versions=(1, 9),
    flexible_versions="6+",
    request=[
        Field("group_id", "string", "0-7"),
        Array("topics", "0-7", [
            Field("name", "string", "0-7"),
            Field("partition_indexes", "[]int32", "0-7"),
        ], nullable="2-7"),
        Array("groups", "8+", [
            Field("group_id", "string", "8+"),
            Field("member_id", "string", "9+", nullable="9+"),
            Field("member_epoch", "int32", "9+", default=-1),
            Array("topics", "8+", [
                Field("name", "string", "8+"),
                Field("partition_indexes", "[]int32", "8+"),
            ], nullable="8+"),
        ]),
        Field("require_stable", "bool", "7+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "3+"),
        Array("topics", "0-7", [
            Field("name", "string", "0-7"),
            Array("partitions", "0-7", _PARTITION),
        ]),
        Field("error_code", "int16", "2-7"),
        Array("groups", "8+", [
            Field("group_id", "string", "8+"),
            Array("topics", "8+", [
                Field("name", "string", "8+"),
                Array("partitions", "8+", _PARTITION),
            ]),
            Field("error_code", "int16", "8+"),
        ]),
    ],
)
