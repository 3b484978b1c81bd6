"""OffsetForLeaderEpoch (key 23): end offset of a leader epoch (truncation after failover).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=23,
    name="OffsetForLeaderEpoch",
    valid_versions=(2, 3),
    flexible_versions="4+",
    request=[
        Field("replica_id", "int32", "3+", default=-2),
        Array("topics", "0+", [
            Field("topic", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition", "int32", "0+"),
                Field("current_leader_epoch", "int32", "2+", default=-1),
                Field("leader_epoch", "int32", "0+"),
            ]),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "2+"),
        Array("topics", "0+", [
            Field("topic", "string", "0+"),
            Array("partitions", "0+", [
                Field("error_code", "int16", "0+"),
                Field("partition", "int32", "0+"),
                Field("leader_epoch", "int32", "1+", default=-1),
                Field("end_offset", "int64", "0+", default=-1),
            ]),
        ]),
    ],
)
