"""ListPartitionReassignments (key 46, KIP-455): the reassignments in progress;
served by the controller.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=46,
    name="ListPartitionReassignments",
    valid_versions=(0, 0),
    flexible_versions="0+",
    request=[
        Field("timeout_ms", "int32", "0+", default=60000),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Field("partition_indexes", "[]int32", "0+"),
        ], nullable="0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("replicas", "[]int32", "0+"),
                Field("adding_replicas", "[]int32", "0+"),
                Field("removing_replicas", "[]int32", "0+"),
            ]),
        ]),
    ],
)
