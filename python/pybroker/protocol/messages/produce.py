"""Produce (key 0): append record batches to partitions.

The broker handles versions 3-10 (one layout); 0-2 are declared (their layout) and
advertised, as Kafka 4.0 does so that librdkafka keeps compression on, but a request of
one closes the connection (pybroker.handlers.produce). acks=0 requests get no
response. Version 9 is flexible; 10 adds the tagged ``current_leader`` and
``node_endpoints`` of KIP-951 (pybroker.handlers.leader_hint).
"""

from pybroker.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=0,
    name="Produce",
    valid_versions=(0, 10),
    flexible_versions="9+",
    request=[
        Field("transactional_id", "string", "3+", nullable="3+"),
        Field("acks", "int16", "0+"),
        Field("timeout_ms", "int32", "0+"),
        Array("topic_data", "0+", [
            Field("name", "string", "0-12"),
            Array("partition_data", "0+", [
                Field("index", "int32", "0+"),
                Field("records", "records", "0+", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        Array("responses", "0+", [
            Field("name", "string", "0-12"),
            Array("partition_responses", "0+", [
                Field("index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("base_offset", "int64", "0+"),
                Field("log_append_time_ms", "int64", "2+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Array("record_errors", "8+", [
                    Field("batch_index", "int32", "8+"),
                    Field("batch_index_error_message", "string", "8+", nullable="8+"),
                ]),
                Field("error_message", "string", "8+", nullable="8+"),
                Struct("current_leader", "10+", [
                    Field("leader_id", "int32", "10+", default=-1),
                    Field("leader_epoch", "int32", "10+", default=-1),
                ], tag=0),
            ]),
        ]),
        Field("throttle_time_ms", "int32", "1+"),
        Array("node_endpoints", "10+", [
            Field("node_id", "int32", "10+"),
            Field("host", "string", "10+"),
            Field("port", "int32", "10+"),
            Field("rack", "string", "10+", nullable="10+"),
        ], tag=0),
    ],
)
