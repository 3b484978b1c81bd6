"""This broker as a client of the others (the replica fetcher): the inter-broker
listener's security protocol (`inter.broker.listener.name`, else
`security.inter.broker.protocol`), TLS with the broker's truststore (and keystore,
for listeners that require client certificates), and SASL with
`sasl.mechanism.inter.broker.protocol` and the `username` / `password` of that
listener's JAAS line (`listener.name.<l>.<mechanism>.sasl.jaas.config`), as Kafka."""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from pybroker.config import BrokerConfig, ConfigError
from pybroker.errors import ErrorCode
from pybroker.security.sasl import jaas_options
from pybroker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from pybroker.security.scram import SaslFailed, ScramClient
from pybroker.security.settings import listener_raw, listener_value
from pybroker.security.tls import TLS_PROTOCOLS
from pybroker.server.listeners import Listener

Request = Callable[[int, int, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class InterBrokerSecurity:
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    async def authenticate(self, request: Request) -> None:
        """SaslHandshake v1 and SaslAuthenticate v1 rounds over `request`."""
        if self.mechanism is None:
            return
        answer = await request(17, 1, {"mechanism": self.mechanism})
        if answer["error_code"]:
            raise SaslFailed(f"SaslHandshake: {ErrorCode(answer['error_code']).name}")

        async def step(token: bytes) -> bytes:
            reply = await request(36, 1, {"auth_bytes": token})
            if reply["error_code"]:
                raise SaslFailed(str(reply["error_message"]))
            return bytes(reply["auth_bytes"])

        if self.mechanism == "PLAIN":
            await step(f"\x00{self.username}\x00{self.password}".encode())
            return
        client = ScramClient(self.mechanism, self.username, self.password)
        server_first = await step(client.first())
        client.verify(await step(client.final(server_first)))


def inter_broker_security(config: BrokerConfig, listener: Listener) -> InterBrokerSecurity:
    protocol = listener.security_protocol
    name = listener.name
    context = None
    if protocol in TLS_PROTOCOLS:
        context = ssl.create_default_context()
        truststore = listener_value(config, name, "ssl.truststore.location")
        if truststore:
            context.load_verify_locations(cafile=str(truststore))
        keystore = listener_value(config, name, "ssl.keystore.location")
        if keystore and listener_value(config, name, "ssl.keystore.type") == "PEM":
            password = listener_value(config, name, "ssl.key.password")
            context.load_cert_chain(str(keystore), password=password if password is not None
                                    else (lambda: b""))
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return InterBrokerSecurity(protocol, context)
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"])
    if mechanism != "PLAIN" and mechanism not in SCRAM_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism} is not "
                          "supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    options = jaas_options(listener_raw(config, name, f"{mechanism.lower()}.sasl.jaas.config")
                           or "")
    return InterBrokerSecurity(protocol, context, mechanism, options.get("username", ""),
                               options.get("password", ""))


_CACHE: dict[int, InterBrokerSecurity] = {}


def for_config(config: BrokerConfig) -> InterBrokerSecurity:
    """The broker's inter-broker security (built once per config)."""
    found = _CACHE.get(id(config))
    if found is None:
        from pybroker.server.listeners import inter_broker_listener, listener_settings

        _, advertised = listener_settings(config)
        found = _CACHE[id(config)] = inter_broker_security(
            config, inter_broker_listener(config, advertised))
    return found
