"""The broker-to-broker client: a follower's connection to its leader."""

from pybroker.client.connection import BrokerConnection, BrokerUnreachable

__all__ = ["BrokerConnection", "BrokerUnreachable"]
