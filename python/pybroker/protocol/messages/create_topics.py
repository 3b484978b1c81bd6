"""CreateTopics (key 19): create topics with partition counts, assignments and configs.

Version 5 is flexible and answers with the topic's partitions, replication factor and
configs (KIP-525); 6 only adds quota errors; 7 answers with the topic id (KIP-516).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=19,
    name="CreateTopics",
    valid_versions=(2, 7),
    flexible_versions="5+",
    request=[
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Field("num_partitions", "int32", "0+"),
            Field("replication_factor", "int16", "0+"),
            Array("assignments", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("broker_ids", "[]int32", "0+"),
            ]),
            Array("configs", "0+", [
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            ]),
        ]),
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("validate_only", "bool", "1+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "2+"),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Field("topic_id", "uuid", "7+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "1+", nullable="0+"),
            Field("topic_config_error_code", "int16", "5+", tag=0),
            Field("num_partitions", "int32", "5+", default=-1),
            Field("replication_factor", "int16", "5+", default=-1),
            Array("configs", "5+", [
                Field("name", "string", "5+"),
                Field("value", "string", "5+", nullable="5+"),
                Field("read_only", "bool", "5+"),
                Field("config_source", "int8", "5+", default=-1),
                Field("is_sensitive", "bool", "5+"),
            ], nullable="5+"),
        ]),
    ],
)
