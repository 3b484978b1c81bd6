"""SaslAuthenticate (key 36): one SASL token each way; v1 tells the client how long
its session lasts (connections.max.reauth.ms, KIP-368).
"""

from pybroker.protocol.schema import Api, Field

API = Api(
    key=36,
    name="SaslAuthenticate",
    valid_versions=(0, 2),
    flexible_versions="2+",
    request=[
        Field("auth_bytes", "bytes", "0+"),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("auth_bytes", "bytes", "0+"),
        Field("session_lifetime_ms", "int64", "1+"),
    ],
)
