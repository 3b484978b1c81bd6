"""The one way this broker opens a connection to another broker (a follower to its
leader, the transaction coordinator to a partition leader, a stopping broker to the
controller, a forwarded admin request): to the other broker's inter-broker endpoint,
with the inter-broker listener's security (TLS, SASL and the broker's credentials),
as Kafka's broker-to-broker channels all use `inter.broker.listener.name`'s. A
connection made any other way would speak PLAINTEXT to a SASL or TLS listener and
never get an answer, so no broker-to-broker path builds a BrokerConnection itself
(tests/client/test_peer.py holds the package to that)."""

from __future__ import annotations

from typing import Protocol

from pybroker.client.connection import BrokerConnection
from pybroker.config import BrokerConfig
from pybroker.security import inter_broker


class Endpoint(Protocol):
    """Where another broker listens for brokers (metadata.cache.BrokerEndpoint)."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...


def connect_peer(config: BrokerConfig, endpoint: Endpoint, client_id: str,
                 timeout_s: float) -> BrokerConnection:
    """A connection (opened at its first request) to `endpoint` that authenticates as
    this broker on the inter-broker listener."""
    return BrokerConnection(endpoint.host, endpoint.port, client_id, timeout_s,
                            security=inter_broker.for_config(config))
