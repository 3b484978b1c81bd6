"""OffsetFetch (key 9): read a group's committed offsets (null topics = all, v2+;
v7 require_stable: UNSTABLE_OFFSET_COMMIT while a transactional commit is pending).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=9,
    name="OffsetFetch",
    valid_versions=(1, 7),
    flexible_versions="6+",
    request=[
        Field("group_id", "string", "0-7"),
        Array("topics", "0-7", [
            Field("name", "string", "0-7"),
            Field("partition_indexes", "[]int32", "0-7"),
        ], nullable="2-7"),
        Field("require_stable", "bool", "7+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "3+"),
        Array("topics", "0-7", [
            Field("name", "string", "0-7"),
            Array("partitions", "0-7", [
                Field("partition_index", "int32", "0-7"),
                Field("committed_offset", "int64", "0-7"),
                Field("committed_leader_epoch", "int32", "5-7", default=-1),
                Field("metadata", "string", "0-7", nullable="0-7"),
                Field("error_code", "int16", "0-7"),
            ]),
        ]),
        Field("error_code", "int16", "2-7"),
    ],
)
