"""DeleteTopics (key 20): delete topics by name.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=20,
    name="DeleteTopics",
    valid_versions=(1, 3),
    flexible_versions="4+",
    request=[
        Field("topic_names", "[]string", "0-5"),
        Field("timeout_ms", "int32", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Array("responses", "0+", [
            Field("name", "string", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
    ],
)
