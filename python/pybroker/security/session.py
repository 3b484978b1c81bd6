"""Who is on a connection: the listener it came in on and its principal
(Kafka's KafkaPrincipal, written `User:<name>`)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

#: Kafka's principal of a client that did not authenticate (PLAINTEXT, or SSL
#: without a client certificate)
ANONYMOUS = "User:ANONYMOUS"
#: protocols whose clients must complete SASL before any other request
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
#: SaslHandshake, ApiVersions, SaslAuthenticate
SASL_API_KEYS = (17, 18, 36)


@dataclasses.dataclass(slots=True)
class Session:
    listener: str
    security_protocol: str
    principal: str = ANONYMOUS
    #: SASL listeners: False until SaslAuthenticate succeeds
    authenticated: bool = True
    #: the mechanism chosen by SaslHandshake and its exchange in progress (None: none)
    mechanism: str | None = None
    sasl: Any = None
    #: after SaslHandshake v0: the next frames are bare SASL tokens
    raw_sasl: bool = False
    #: monotonic time the SASL session ends (connections.max.reauth.ms); 0.0: never
    expires_at: float = 0.0
    #: the response about to be written is the connection's last (a failed exchange)
    close_after_response: bool = False

    def admits(self, api_key: int) -> bool:
        """Kafka's rule: before SASL completes, and once its session has expired, only
        ApiVersions and the SASL requests are handled; anything else closes."""
        if api_key in SASL_API_KEYS:
            return True
        if not self.authenticated:
            return False
        return not self.expires_at or time.monotonic() < self.expires_at

    @classmethod
    def for_listener(cls, listener: str, security_protocol: str) -> Session:
        return cls(listener, security_protocol,
                   authenticated=security_protocol not in SASL_PROTOCOLS)


def listener_of(conn: object) -> str | None:
    """The listener name a connection came in on (None: not known, e.g. a test's)."""
    session = getattr(conn, "session", None)
    return session.listener if session is not None else None
