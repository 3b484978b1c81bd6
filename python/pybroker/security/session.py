"""Who is on a connection: the listener it came in on and its principal
(Kafka's KafkaPrincipal, written `User:<name>`)."""

from __future__ import annotations

import dataclasses

#: Kafka's principal of a client that did not authenticate (PLAINTEXT, or SSL
#: without a client certificate)
ANONYMOUS = "User:ANONYMOUS"
#: protocols whose clients must complete SASL before any other request
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


@dataclasses.dataclass(slots=True)
class Session:
    listener: str
    security_protocol: str
    principal: str = ANONYMOUS
    #: SASL listeners: False until SaslAuthenticate succeeds
    authenticated: bool = True

    @classmethod
    def for_listener(cls, listener: str, security_protocol: str) -> Session:
        return cls(listener, security_protocol,
                   authenticated=security_protocol not in SASL_PROTOCOLS)


def listener_of(conn: object) -> str | None:
    """The listener name a connection came in on (None: not known, e.g. a test's)."""
    session = getattr(conn, "session", None)
    return session.listener if session is not None else None
