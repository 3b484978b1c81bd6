"""Broker-to-broker connections are made in one place (pybroker.client.peer), with
the inter-broker listener's security: a path that built its own BrokerConnection
would speak PLAINTEXT to a SASL or TLS inter-broker listener (the transaction
markers and the controlled shutdown did)."""

from __future__ import annotations

import ast
from pathlib import Path

from pybroker.client.peer import connect_peer
from pybroker.config import BrokerConfig
from pybroker.metadata.cache import BrokerEndpoint

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "pybroker"
#: where a BrokerConnection may be built: its definition, the peer factory, and the
#: command-line tools (clients of the cluster, configured with their own properties)
ALLOWED = {"client/connection.py", "client/peer.py"}
CLIENT_PACKAGES = ("tools/",)


def _builds_connection(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "BrokerConnection":
                lines.append(node.lineno)
    return lines


def test_only_the_peer_factory_connects_to_brokers() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in ALLOWED or relative.startswith(CLIENT_PACKAGES):
            continue
        lines = _builds_connection(ast.parse(path.read_text(), str(path)))
        if lines:
            found[relative] = lines
    assert found == {}, ("build broker-to-broker connections with "
                         "pybroker.client.peer.connect_peer (inter-broker security)")


def test_a_peer_connection_authenticates_as_the_broker() -> None:
    config = BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9,INTERNAL://127.0.0.1:10",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="broker" password="broker-pw";'})
    connection = connect_peer(config, BrokerEndpoint(2, "127.0.0.1", 10), "broker-1-test", 5.0)
    assert (connection.host, connection.port, connection.client_id) == (
        "127.0.0.1", 10, "broker-1-test")
    assert connection.security is not None
    assert connection.security.protocol == "SASL_PLAINTEXT"
    assert (connection.security.mechanism, connection.security.username) == ("PLAIN", "broker")
