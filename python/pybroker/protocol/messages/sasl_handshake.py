"""SaslHandshake (key 17): the client names its SASL mechanism; the broker answers
with the mechanisms it has enabled. v1: the tokens then travel in SaslAuthenticate.
"""

from pybroker.protocol.schema import Api, Field

API = Api(
    key=17,
    name="SaslHandshake",
    valid_versions=(0, 1),
    flexible_versions="none",
    request=[
        Field("mechanism", "string", "0+"),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Field("mechanisms", "[]string", "0+"),
    ],
)
