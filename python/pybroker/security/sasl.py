"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: which mechanisms a listener
offers, PLAIN's users from the JAAS line, and the per-connection exchange.

Kafka's names: `sasl.enabled.mechanisms` (or `listener.name.<l>.sasl.enabled.
mechanisms`), and per listener and mechanism
`listener.name.<l>.<mechanism>.sasl.jaas.config`, e.g.
  listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.\
PlainLoginModule required user_admin="admin-secret" user_bob="bob-secret";
PLAIN checks `user_<name>="<password>"` entries; SCRAM credentials come from the
metadata store (pybroker.security.store, see handlers/scram_credentials.py)."""

from __future__ import annotations

import hmac
import re
from typing import Any

from pybroker.config import BrokerConfig, ConfigError
from pybroker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from pybroker.security.scram import CredentialLookup, SaslFailed, ScramServer
from pybroker.security.settings import listener_raw, listener_value

#: the mechanisms pybroker implements
SUPPORTED = ("PLAIN", *SCRAM_MECHANISMS)
# JAAS options: key="quoted value" or key=bare
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def enabled_mechanisms(config: BrokerConfig, listener: str) -> list[str]:
    """The listener's enabled mechanisms that pybroker implements, in the configured order."""
    return [m for m in listener_value(config, listener, "sasl.enabled.mechanisms")
            if m in SUPPORTED]


def jaas_options(text: str) -> dict[str, str]:
    """The options of a JAAS login module line (after `<class> required`)."""
    options = {}
    for match in _JAAS_OPTION.finditer(text):
        value = match.group(2) if match.group(2) is not None else match.group(3)
        options[match.group(1)] = re.sub(r"\\(.)", r"\1", value)
    return options


def plain_users(config: BrokerConfig, listener: str) -> dict[str, str]:
    """user -> password from the listener's PLAIN JAAS line (`user_<name>="<pw>"`)."""
    text = listener_raw(config, listener, "plain.sasl.jaas.config") or ""
    return {k[len("user_"):]: v for k, v in jaas_options(text).items() if k.startswith("user_")}


def check_listeners(config: BrokerConfig, listeners: list[Any]) -> None:
    """Refuse at startup what Kafka refuses: a SASL listener with no mechanism pybroker
    serves, or PLAIN without the listener's JAAS line (no users)."""
    for listener in listeners:
        if listener.security_protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            continue
        mechanisms = enabled_mechanisms(config, listener.name)
        if not mechanisms:
            raise ConfigError(
                f"listener {listener} ({listener.security_protocol}): sasl.enabled.mechanisms "
                f"has none of {', '.join(SUPPORTED)}")
        if "PLAIN" in mechanisms and listener_raw(config, listener.name,
                                                  "plain.sasl.jaas.config") is None:
            raise ConfigError(
                f"listener {listener}: PLAIN needs listener.name.{listener.name.lower()}."
                "plain.sasl.jaas.config (with user_<name>=\"<password>\" entries)")


class PlainServer:
    """RFC 4616: one message, [authzid] NUL authcid NUL passwd."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.username: str | None = None

    @property
    def complete(self) -> bool:
        return self.username is not None

    async def step(self, token: bytes) -> bytes:
        if self.username is not None:
            raise SaslFailed("Unexpected SASL request after the exchange completed")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailed("Authentication failed: username not specified")
        if not password:
            raise SaslFailed("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslFailed("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        expected = self.users.get(user)
        # compared in constant time, and for unknown users too (no timing oracle)
        ok = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
        if expected is None or not ok:
            raise SaslFailed("Authentication failed: Invalid username or password")
        self.username = user
        return b""


SaslServer = PlainServer | ScramServer


def new_server(mechanism: str, config: BrokerConfig, listener: str,
               lookup: CredentialLookup) -> SaslServer:
    if mechanism == "PLAIN":
        return PlainServer(plain_users(config, listener))
    return ScramServer(mechanism, lookup)
