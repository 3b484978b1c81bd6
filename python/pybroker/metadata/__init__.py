"""What this broker knows of the cluster, for handlers to read."""

from pybroker.metadata.cache import BrokerEndpoint, MetadataCache

__all__ = ["BrokerEndpoint", "MetadataCache"]
