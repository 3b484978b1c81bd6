"""DescribeTopicPartitions (key 75): topics and their partitions, paged (KIP-966).

Always flexible. An answer holds at most ``response_partition_limit`` partitions;
``next_cursor`` (topic, partition) says where the next request should start, and a
request's ``cursor`` where this one starts. Cursors are nullable structs.
"""

from pybroker.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=75,
    name="DescribeTopicPartitions",
    valid_versions=(0, 0),
    flexible_versions="0+",
    request=[
        Array("topics", "0+", [
            Field("name", "string", "0+"),
        ]),
        Field("response_partition_limit", "int32", "0+", default=2000),
        Struct("cursor", "0+", [
            Field("topic_name", "string", "0+"),
            Field("partition_index", "int32", "0+"),
        ], nullable="0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("topics", "0+", [
            Field("error_code", "int16", "0+"),
            Field("name", "string", "0+", nullable="0+"),
            Field("topic_id", "uuid", "0+"),
            Field("is_internal", "bool", "0+"),
            Array("partitions", "0+", [
                Field("error_code", "int16", "0+"),
                Field("partition_index", "int32", "0+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "0+", default=-1),
                Field("replica_nodes", "[]int32", "0+"),
                Field("isr_nodes", "[]int32", "0+"),
                Field("eligible_leader_replicas", "[]int32", "0+", nullable="0+"),
                Field("last_known_elr", "[]int32", "0+", nullable="0+"),
                Field("offline_replicas", "[]int32", "0+"),
            ]),
            Field("topic_authorized_operations", "int32", "0+", default=-2147483648),
        ]),
        Struct("next_cursor", "0+", [
            Field("topic_name", "string", "0+"),
            Field("partition_index", "int32", "0+"),
        ], nullable="0+"),
    ],
)
