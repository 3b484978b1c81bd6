"""ConsumerGroupDescribe (key 69): KIP-848 groups with their epochs, members,
current and target assignments (the admin client's describeConsumerGroups asks
this first and falls back to DescribeGroups on GROUP_ID_NOT_FOUND).
"""

from pybroker.protocol.schema import Api, Array, Field, Struct

_ASSIGNMENT = [
    Array("topic_partitions", "0+", [
        Field("topic_id", "uuid", "0+"),
        Field("topic_name", "string", "0+"),
        Field("partitions", "[]int32", "0+"),
    ]),
]

API = Api(
    key=69,
    name="ConsumerGroupDescribe",
    valid_versions=(0, 0),
    flexible_versions="0+",
    request=[
        Field("group_ids", "[]string", "0+"),
        Field("include_authorized_operations", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("groups", "0+", [
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("group_epoch", "int32", "0+"),
            Field("assignment_epoch", "int32", "0+"),
            Field("assignor_name", "string", "0+"),
            Array("members", "0+", [
                Field("member_id", "string", "0+"),
                Field("instance_id", "string", "0+", nullable="0+"),
                Field("rack_id", "string", "0+", nullable="0+"),
                Field("member_epoch", "int32", "0+"),
                Field("client_id", "string", "0+"),
                Field("client_host", "string", "0+"),
                Field("subscribed_topic_names", "[]string", "0+"),
                Field("subscribed_topic_regex", "string", "0+", nullable="0+"),
                Struct("assignment", "0+", _ASSIGNMENT),
                Struct("target_assignment", "0+", _ASSIGNMENT),
            ]),
            Field("authorized_operations", "int32", "0+", default=-2147483648),
        ]),
    ],
)
