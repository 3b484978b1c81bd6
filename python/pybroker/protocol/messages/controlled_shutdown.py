"""ControlledShutdown (key 7): a broker about to stop asks the controller to move
its leaderships away and take it out of the ISRs first.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=7,
    name="ControlledShutdown",
    valid_versions=(1, 3),
    flexible_versions="3+",
    request=[
        Field("broker_id", "int32", "0+"),
        Field("broker_epoch", "int64", "2+", default=-1),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Array("remaining_partitions", "0+", [
            Field("topic_name", "string", "0+"),
            Field("partition_index", "int32", "0+"),
        ]),
    ],
)
