"""ListOffsets (key 2): offsets for a timestamp (-1 latest, -2 earliest, -3 the record
with the largest timestamp). Version 6 is flexible; 7 allows -3 (KIP-734).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=2,
    name="ListOffsets",
    valid_versions=(1, 7),
    flexible_versions="6+",
    request=[
        Field("replica_id", "int32", "0+"),
        Field("isolation_level", "int8", "2+"),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("current_leader_epoch", "int32", "4+", default=-1),
                Field("timestamp", "int64", "0+"),
            ]),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "2+"),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("timestamp", "int64", "1+", default=-1),
                Field("offset", "int64", "1+", default=-1),
                Field("leader_epoch", "int32", "4+", default=-1),
            ]),
        ]),
    ],
)
