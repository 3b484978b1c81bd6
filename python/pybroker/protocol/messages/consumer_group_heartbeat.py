"""ConsumerGroupHeartbeat (key 68): KIP-848's one request of the consumer group
protocol (join with epoch 0, heartbeat, leave with -1, static leave with -2).

v1 (KIP-1082): the client makes its own member id and sends it on join, and the
subscription may be a regular expression.
"""

from pybroker.protocol.schema import Api, Array, Field, Struct

_TOPIC_PARTITIONS = [
    Field("topic_id", "uuid", "0+"),
    Field("partitions", "[]int32", "0+"),
]

API = Api(
    key=68,
    name="ConsumerGroupHeartbeat",
    valid_versions=(0, 1),
    flexible_versions="0+",
    request=[
        Field("group_id", "string", "0+"),
        Field("member_id", "string", "0+"),
        Field("member_epoch", "int32", "0+"),
        Field("instance_id", "string", "0+", nullable="0+"),
        Field("rack_id", "string", "0+", nullable="0+"),
        Field("rebalance_timeout_ms", "int32", "0+", default=-1),
        Field("subscribed_topic_names", "[]string", "0+", nullable="0+"),
        Field("subscribed_topic_regex", "string", "1+", nullable="1+"),
        Field("server_assignor", "string", "0+", nullable="0+"),
        Array("topic_partitions", "0+", _TOPIC_PARTITIONS, nullable="0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("member_id", "string", "0+", nullable="0+"),
        Field("member_epoch", "int32", "0+"),
        Field("heartbeat_interval_ms", "int32", "0+"),
        Struct("assignment", "0+", [
            Array("topic_partitions", "0+", _TOPIC_PARTITIONS),
        ], nullable="0+"),
    ],
)
