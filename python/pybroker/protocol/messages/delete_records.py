"""DeleteRecords (key 21): move partitions' log start offsets forward.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=21,
    name="DeleteRecords",
    valid_versions=(0, 1),
    flexible_versions="2+",
    request=[
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("offset", "int64", "0+"),
            ]),
        ]),
        Field("timeout_ms", "int32", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("topics", "0+", [
            Field("name", "string", "0+"),
            Array("partitions", "0+", [
                Field("partition_index", "int32", "0+"),
                Field("low_watermark", "int64", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)
