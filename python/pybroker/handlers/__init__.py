"""Request handlers, one module per Kafka API. Importing this package registers
them all in `registry.HANDLERS`."""

from pybroker.handlers import (  # noqa: F401
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
