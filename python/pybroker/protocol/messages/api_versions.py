"""ApiVersions (key 18): which API versions the broker supports.

Versions 3+ have flexible bodies, but the response header is always v0. An
unsupported request version is answered with error 35 and a v0 body.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=18,
    name="ApiVersions",
    valid_versions=(0, 4),
    flexible_versions="3+",
    request=[
        Field("client_software_name", "string", "3+"),
        Field("client_software_version", "string", "3+"),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Array("api_keys", "0+", [
            Field("api_key", "int16", "0+"),
            Field("min_version", "int16", "0+"),
            Field("max_version", "int16", "0+"),
        ]),
        Field("throttle_time_ms", "int32", "1+"),
        Array("supported_features", "3+", [
            Field("name", "string", "3+"),
            Field("min_version", "int16", "3+"),
            Field("max_version", "int16", "3+"),
        ], tag=0),
        Field("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
        Array("finalized_features", "3+", [
            Field("name", "string", "3+"),
            Field("max_version_level", "int16", "3+"),
            Field("min_version_level", "int16", "3+"),
        ], tag=2),
        Field("zk_migration_ready", "bool", "3+", tag=3),
    ],
)
