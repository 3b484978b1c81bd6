"""AlterPartitionReassignments (key 45, KIP-455): start or cancel (replicas null)
moving partitions onto other brokers; served by the controller.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=45,
    name="AlterPartitionReassignments",
    valid_versions=(0, 0),
    flexible_versions="0+",
    request=[
        Field("timeout_ms", "int32", "0+", default=60000),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("replicas", "[]int32", "0+", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Array("responses", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
)
