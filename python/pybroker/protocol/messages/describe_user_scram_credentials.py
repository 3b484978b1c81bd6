"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iteration
counts) users have credentials for; null users: every user.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=50,
    name="DescribeUserScramCredentials",
    valid_versions=(0, 0),
    flexible_versions="0+",
    request=[
        Array("users", "0+", [
            Field("name", "string", "0+"),
        ], nullable="0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Array("results", "0+", [
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Array("credential_infos", "0+", [
                Field("mechanism", "int8", "0+"),
                Field("iterations", "int32", "0+"),
            ]),
        ]),
    ],
)
