"""DescribeCluster (key 60): the cluster id, the controller and the brokers (KIP-700).

Version 1 adds the endpoint type (1 brokers, 2 controllers: a broker answers only 1).
Every version is flexible.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=60,
    name="DescribeCluster",
    valid_versions=(0, 1),
    flexible_versions="0+",
    request=[
        Field("include_cluster_authorized_operations", "bool", "0+"),
        Field("endpoint_type", "int8", "1+", default=1),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("endpoint_type", "int8", "1+", default=1),
        Field("cluster_id", "string", "0+"),
        Field("controller_id", "int32", "0+", default=-1),
        Array("brokers", "0+", [
            Field("broker_id", "int32", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("rack", "string", "0+", nullable="0+"),
        ]),
        Field("cluster_authorized_operations", "int32", "0+", default=-2147483648),
    ],
)
