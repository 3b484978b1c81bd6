"""TLS settings without a broker: Kafka's DN format, which listeners ask for client
certificates, and the keystore checks made before the broker starts."""

from __future__ import annotations

import pytest

from pybroker.config import BrokerConfig, ConfigError
from pybroker.security.tls import client_auth, rfc2253, server_contexts
from pybroker.server.listeners import Listener, listener_settings
from tests.security.certs import Pki
from tests.security.conftest import tls_overrides


def test_dn_is_written_as_java_writes_it() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),),
               (("organizationalUnitName", "test"),), (("commonName", "client"),))
    assert rfc2253(subject) == "CN=client,OU=test,O=Acme\\, Inc.,C=US"
    assert rfc2253(((("commonName", "client"),),)) == "CN=client"
    assert rfc2253(((("commonName", " a+b "),),)) == "CN=\\ a\\+b\\ "


def test_unprefixed_client_auth_is_for_ssl_listeners_only() -> None:
    config = BrokerConfig({"ssl.client.auth": "required",
                           "listener.name.secure.ssl.client.auth": "requested"})
    assert client_auth(config, Listener("SSL", "h", 1, "SSL")) == "required"
    assert client_auth(config, Listener("SASL_SSL", "h", 2, "SASL_SSL")) == "none"
    assert client_auth(config, Listener("SECURE", "h", 3, "SASL_SSL")) == "requested"


def test_named_tls_listeners_get_contexts(pki: Pki) -> None:
    config = BrokerConfig({
        **tls_overrides(pki),
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,EXTERNAL:SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    assert sorted(server_contexts(config, listener_settings(config)[0])) == [
        "EXTERNAL", "INTERNAL"]


@pytest.mark.parametrize(("given", "message"), [
    ({"ssl.keystore.location": ""}, "needs ssl.keystore.location"),
    ({"ssl.key.password": "wrong"}, "cannot load keystore"),
    ({"ssl.keystore.type": "JKS"}, "JKS is not supported"),
    ({"ssl.client.auth": "required", "ssl.truststore.location": ""},
     "needs ssl.truststore.location"),
])
def test_keystore_mistakes_fail_the_start(pki: Pki, given: dict[str, str],
                                          message: str) -> None:
    settings = {**tls_overrides(pki), "listeners": "SSL://127.0.0.1:0"}
    settings.update(given)
    config = BrokerConfig({k: v for k, v in settings.items() if v != ""})
    with pytest.raises(ConfigError, match=message):
        server_contexts(config, listener_settings(config)[0])


@pytest.mark.parametrize(("given", "message"), [
    ({}, "sasl.enabled.mechanisms has none of"),  # Kafka's default is GSSAPI
    ({"sasl.enabled.mechanisms": "PLAIN"}, "PLAIN needs listener.name.sasl_plaintext.plain"),
])
def test_sasl_listener_mistakes_fail_the_start(given: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        listener_settings(BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **given}))
