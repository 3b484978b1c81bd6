"""Listener parsing and validation: Kafka's rules and messages."""

from __future__ import annotations

import socket

import pytest

from pybroker.config import BrokerConfig, ConfigError
from pybroker.server.listeners import (
    Listener,
    bind_listeners,
    listener_settings,
    parse_listeners,
    parse_protocol_map,
)


def settings(**given: str) -> tuple[list[Listener], list[Listener]]:
    return listener_settings(BrokerConfig({k.replace("_", "."): v for k, v in given.items()}))


def test_default_map_is_kafkas() -> None:
    assert parse_protocol_map(BrokerConfig()["listener.security.protocol.map"]) == {
        "PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
        "SASL_SSL": "SASL_SSL"}


def test_forms_of_an_endpoint() -> None:
    assert parse_listeners("PLAINTEXT://:9092, plaintext2://[::1]:0",
                           {"PLAINTEXT": "PLAINTEXT", "PLAINTEXT2": "PLAINTEXT"}) == [
        Listener("PLAINTEXT", "", 9092), Listener("PLAINTEXT2", "::1", 0)]
    assert str(Listener("X", "::1", 1)) == "X://[::1]:1"


def test_named_listeners_take_their_protocol_from_the_map() -> None:
    listeners, advertised = settings(
        listeners="INTERNAL://127.0.0.1:9093,EXTERNAL://0.0.0.0:9094",
        advertised_listeners="EXTERNAL://broker.example:9094",
        listener_security_protocol_map="internal:plaintext,EXTERNAL:PLAINTEXT")
    assert [(lis.name, lis.security_protocol) for lis in listeners] == [
        ("INTERNAL", "PLAINTEXT"), ("EXTERNAL", "PLAINTEXT")]
    assert advertised == [Listener("EXTERNAL", "broker.example", 9094)]


def test_one_ipv4_and_one_ipv6_address_may_share_a_port() -> None:
    listeners, _ = settings(listeners="A://127.0.0.1:9092,B://[::1]:9092,C://h:0,D://h:0",
                            listener_security_protocol_map="A:PLAINTEXT,B:PLAINTEXT,"
                                                           "C:PLAINTEXT,D:PLAINTEXT")
    assert [lis.port for lis in listeners] == [9092, 9092, 0, 0]
    with pytest.raises(ConfigError, match="Each listener must have a different port"):
        settings(listeners="A://127.0.0.1:9092,B://127.0.0.2:9092",
                 listener_security_protocol_map="A:PLAINTEXT,B:PLAINTEXT")


@pytest.mark.parametrize(("given", "message"), [
    ({"listeners": "PLAINTEXT://h"}, "Unable to parse PLAINTEXT://h to a broker endpoint"),
    ({"listeners": ""}, "listeners must not be empty"),
    ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name must be"),
    ({"listener.security.protocol.map": "PLAINTEXT"}, "listener.security.protocol.map"),
    ({"advertised.listeners": "PLAINTEXT://[::1]:1,PLAINTEXT://h:2"},
     "Each listener must have a different name"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "nonroutable meta-address"),
])
def test_mistakes(given: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        listener_settings(BrokerConfig(given))


def test_a_port_in_use_fails_the_whole_bind() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"Socket server failed to bind to 127.0.0.1:{port}"):
            bind_listeners([Listener("A", "127.0.0.1", 0), Listener("B", "127.0.0.1", port)])
