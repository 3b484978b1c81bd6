"""DescribeConfigs (key 32): configuration of topics and brokers.
"""

from pybroker.protocol.schema import Api, Array, Field

API = Api(
    key=32,
    name="DescribeConfigs",
    valid_versions=(1, 3),
    flexible_versions="4+",
    request=[
        Array("resources", "0+", [
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configuration_keys", "[]string", "0+", nullable="0+"),
        ]),
        Field("include_synonyms", "bool", "1+"),
        Field("include_documentation", "bool", "3+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Array("results", "0+", [
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Array("configs", "0+", [
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
                Field("read_only", "bool", "0+"),
                Field("config_source", "int8", "1+", default=-1),
                Field("is_sensitive", "bool", "0+"),
                Array("synonyms", "1+", [
                    Field("name", "string", "1+"),
                    Field("value", "string", "1+", nullable="0+"),
                    Field("source", "int8", "1+"),
                ]),
                Field("config_type", "int8", "3+"),
                Field("documentation", "string", "3+", nullable="0+"),
            ]),
        ]),
    ],
)
