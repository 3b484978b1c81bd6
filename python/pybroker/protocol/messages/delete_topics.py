"""DeleteTopics (key 20): delete topics by name, or from version 6 by name or id
(KIP-516). Version 4 is flexible, 5 adds error messages.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=20,
    name="DeleteTopics",
    valid_versions=(1, 6),
    flexible_versions="4+",
    request=[
        Array("topics", "6+", [
            Field("name", "string", "6+", nullable="6+"),
            Field("topic_id", "uuid", "6+"),
        ]),
        Field("topic_names", "[]string", "0-5"),
        Field("timeout_ms", "int32", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Array("responses", "0+", [
            Field("name", "string", "0+", nullable="6+"),
            Field("topic_id", "uuid", "6+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "5+", nullable="5+"),
        ]),
    ],
)
