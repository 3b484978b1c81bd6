"""Metadata (key 3): brokers, topics, partitions and leaders.

In v0 an empty ``topics`` array means all topics; from v1 a null array does.
Version 9 is flexible; 10 adds topic ids (KIP-516), 12 lets a request name a topic
by id alone (name null); 13 adds a top-level error code (KIP-1102).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=3,
    name="Metadata",
    valid_versions=(0, 13),
    flexible_versions="9+",
    request=[
        Array("topics", "0+", [
            Field("topic_id", "uuid", "10+"),
            Field("name", "string", "0+", nullable="10+"),
        ], nullable="1+"),
        Field("allow_auto_topic_creation", "bool", "4+", default=True),
        Field("include_cluster_authorized_operations", "bool", "8-10"),
        Field("include_topic_authorized_operations", "bool", "8+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "3+"),
        Array("brokers", "0+", [
            Field("node_id", "int32", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("rack", "string", "1+", nullable="1+"),
        ]),
        Field("cluster_id", "string", "2+", nullable="2+"),
        Field("controller_id", "int32", "1+", default=-1),
        Array("topics", "0+", [
            Field("error_code", "int16", "0+"),
            Field("name", "string", "0+", nullable="12+"),
            Field("topic_id", "uuid", "10+"),
            Field("is_internal", "bool", "1+"),
            Array("partitions", "0+", [
                Field("error_code", "int16", "0+"),
                Field("partition_index", "int32", "0+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "7+", default=-1),
                Field("replica_nodes", "[]int32", "0+"),
                Field("isr_nodes", "[]int32", "0+"),
                Field("offline_replicas", "[]int32", "5+"),
            ]),
            Field("topic_authorized_operations", "int32", "8+", default=-2147483648),
        ]),
        Field("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
        Field("error_code", "int16", "13+"),
    ],
)
