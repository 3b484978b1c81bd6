"""Fetch (key 1): read record batches from partitions (consumers and followers).

Version 12 is the first flexible one (librdkafka 2.6.0 sends it). ``records``
in the response defaults to empty bytes, never null. Version 13 names topics by
id (KIP-516); 14 only adds an error; 15 moves the replica id into the tagged
``replica_state`` (KIP-903); 16 adds the tagged ``node_endpoints`` to the response
(KIP-951); 17 adds the tagged ``replica_directory_id`` (KIP-853).
"""

from pybroker.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=1,
    name="Fetch",
    valid_versions=(4, 17),
    flexible_versions="12+",
    request=[
        Field("cluster_id", "string", "12+", nullable="12+", tag=0),
        Field("replica_id", "int32", "0-14", default=-1),
        Struct("replica_state", "15+", [
            Field("replica_id", "int32", "15+", default=-1),
            Field("replica_epoch", "int64", "15+", default=-1),
        ], tag=1),
        Field("max_wait_ms", "int32", "0+"),
        Field("min_bytes", "int32", "0+"),
        Field("max_bytes", "int32", "3+", default=2147483647),
        Field("isolation_level", "int8", "4+"),
        Field("session_id", "int32", "7+"),
        Field("session_epoch", "int32", "7+", default=-1),
        Array("topics", "0+", [
            Field("topic", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Array("partitions", "0+", [
                Field("partition", "int32", "0+"),
                Field("current_leader_epoch", "int32", "9+", default=-1),
                Field("fetch_offset", "int64", "0+"),
                Field("last_fetched_epoch", "int32", "12+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("partition_max_bytes", "int32", "0+"),
                Field("replica_directory_id", "uuid", "17+", tag=0),
            ]),
        ]),
        Array("forgotten_topics_data", "7+", [
            Field("topic", "string", "7-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partitions", "[]int32", "7+"),
        ]),
        Field("rack_id", "string", "11+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "7+"),
        Field("session_id", "int32", "7+"),
        Array("responses", "0+", [
            Field("topic", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("high_watermark", "int64", "0+"),
                Field("last_stable_offset", "int64", "4+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Struct("diverging_epoch", "12+", [
                    Field("epoch", "int32", "12+", default=-1),
                    Field("end_offset", "int64", "12+", default=-1),
                ], tag=0),
                Struct("current_leader", "12+", [
                    Field("leader_id", "int32", "12+", default=-1),
                    Field("leader_epoch", "int32", "12+", default=-1),
                ], tag=1),
                Struct("snapshot_id", "12+", [
                    Field("end_offset", "int64", "0+", default=-1),
                    Field("epoch", "int32", "0+", default=-1),
                ], tag=2),
                Array("aborted_transactions", "4+", [
                    Field("producer_id", "int64", "4+"),
                    Field("first_offset", "int64", "4+"),
                ], nullable="4+"),
                Field("preferred_read_replica", "int32", "11+", default=-1),
                Field("records", "records", "0+", nullable="0+", default=b""),
            ]),
        ]),
        Array("node_endpoints", "16+", [
            Field("node_id", "int32", "16+"),
            Field("host", "string", "16+"),
            Field("port", "int32", "16+"),
            Field("rack", "string", "16+", nullable="16+"),
        ], tag=0),
    ],
)
