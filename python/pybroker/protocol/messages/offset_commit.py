"""OffsetCommit (key 8): store a group's consumed offsets (v9: the generation field
carries a KIP-848 member's epoch).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=8,
    name="OffsetCommit",
    valid_versions=(2, 9),
    flexible_versions="8+",
    request=[
        Field("group_id", "string", "0+"),
        Field("generation_id_or_member_epoch", "int32", "1+", default=-1),
        Field("member_id", "string", "1+"),
        Field("group_instance_id", "string", "7+", nullable="7+"),
        Field("retention_time_ms", "int64", "2-4", default=-1),
        Array("topics", "0+", [
            Field("name", "string", "0-9"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("committed_offset", "int64", "0+"),
                Field("committed_leader_epoch", "int32", "6+", default=-1),
                Field("committed_metadata", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "3+"),
        Array("topics", "0+", [
            Field("name", "string", "0-9"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)
