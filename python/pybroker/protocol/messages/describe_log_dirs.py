"""DescribeLogDirs (key 35): each log dir of the broker with its partitions' sizes and
offset lags (KIP-113). A null ``topics`` asks for every partition. Version 1 is the
baseline (Kafka 4.0 removed 0, which had the same layout); version 2 is the
first flexible one, 3 adds the top-level error code, 4 the dir's total and usable
bytes.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=35,
    name="DescribeLogDirs",
    valid_versions=(1, 4),
    flexible_versions="2+",
    request=[
        Array("topics", "0+", [
            Field("topic", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ], nullable="0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "3+"),
        Array("results", "0+", [
            Field("error_code", "int16", "0+"),
            Field("log_dir", "string", "0+"),
            Array("topics", "0+", [
                Field("name", "string", "0+"),
                Array("partitions", "0+", [
                    Field("partition_index", "int32", "0+"),
                    Field("partition_size", "int64", "0+"),
                    Field("offset_lag", "int64", "0+"),
                    Field("is_future_key", "bool", "0+"),
                ]),
            ]),
            Field("total_bytes", "int64", "4+", default=-1),
            Field("usable_bytes", "int64", "4+", default=-1),
        ]),
    ],
)
