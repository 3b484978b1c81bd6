"""AlterUserScramCredentials (key 51): add (salted password) or delete a user's SCRAM
credential for a mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=51,
    name="AlterUserScramCredentials",
    valid_versions=(0, 0),
    flexible_versions="0+",
    request=[
        Array("deletions", "0+", [
            Field("name", "string", "0+"),
            Field("mechanism", "int8", "0+"),
        ]),
        Array("upsertions", "0+", [
            Field("name", "string", "0+"),
            Field("mechanism", "int8", "0+"),
            Field("iterations", "int32", "0+"),
            Field("salt", "bytes", "0+"),
            Field("salted_password", "bytes", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("results", "0+", [
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
        ]),
    ],
)
