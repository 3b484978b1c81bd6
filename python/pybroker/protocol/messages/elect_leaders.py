"""ElectLeaders (key 43): elect the preferred (or, unclean, any live) replica as
leader of partitions; served by the controller.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=43,
    name="ElectLeaders",
    valid_versions=(0, 2),
    flexible_versions="2+",
    request=[
        Field("election_type", "int8", "1+"),
        Array("topic_partitions", "0+", [
            Field("topic", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ], nullable="0+"),
        Field("timeout_ms", "int32", "0+", default=60000),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "1+"),
        Array("replica_election_results", "0+", [
            Field("topic", "string", "0+"),
            Array("partition_result", "0+", [
                Field("partition_id", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
)
