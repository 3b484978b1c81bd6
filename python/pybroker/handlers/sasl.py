"""SaslHandshake (17) and SaslAuthenticate (36): SASL authentication on SASL
listeners, and re-authentication before connections.max.reauth.ms runs out
(KIP-368). A failed exchange is answered with SASL_AUTHENTICATION_FAILED and the
connection is closed, as in Kafka (after connection.failed.authentication.delay.ms'
default 100 ms, which slows password guessing)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import anyio

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles
from pybroker.security import credentials
from pybroker.security.sasl import enabled_mechanisms, new_server
from pybroker.security.scram import SaslFailed, ScramCredential
from pybroker.security.session import SASL_PROTOCOLS
from pybroker.security.store import store_for

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.connection import Connection
    from pybroker.server.dispatch import Request

log = logging.getLogger(__name__)

#: Kafka's connection.failed.authentication.delay.ms default
FAILED_AUTHENTICATION_DELAY_S = 0.1


@handles(17, (0, 1))
async def handle_sasl_handshake(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    session = request.connection.session
    if session is None or session.security_protocol not in SASL_PROTOCOLS:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}
    mechanisms = enabled_mechanisms(ctx.config, session.listener)
    mechanism = request.body["mechanism"]
    if mechanism not in mechanisms:
        session.close_after_response = True
        return {"error_code": int(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                "mechanisms": mechanisms}
    if session.authenticated and session.mechanism is not None and mechanism != \
            session.mechanism:
        # KIP-368: re-authentication keeps the mechanism
        session.close_after_response = True
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": mechanisms}
    store = store_for(ctx.admin.backend, ctx.config.log_dirs[0])

    async def lookup(user: str, mech: str) -> ScramCredential | None:
        return await credentials.lookup(store, user, mech)

    session.mechanism = mechanism
    session.sasl = new_server(mechanism, ctx.config, session.listener, lookup)
    # v0: the tokens follow as bare size-prefixed frames, not SaslAuthenticate requests
    session.raw_sasl = request.version == 0
    return {"error_code": 0, "mechanisms": mechanisms}


async def handle_raw_token(ctx: BrokerContext, conn: Connection, frame: memoryview) -> bool:
    """A SaslHandshake v0 client's token, framed without a request header; the answer
    goes back the same way. False (close) when the exchange fails, as Kafka does."""
    session = conn.session
    assert session is not None and session.sasl is not None
    server = session.sasl
    try:
        token = await server.step(bytes(frame))
    except SaslFailed as exc:
        log.info("Failed authentication with /%s (%s)", conn.host, exc)
        ctx.metrics.authentication_failed()
        return False
    await conn.write([len(token).to_bytes(4, "big") + token])
    if server.complete:
        session.raw_sasl = False
        session.sasl = None
        session.principal = "User:" + str(server.username)
        session.authenticated = True
        lifetime_ms = int(ctx.config["connections.max.reauth.ms"])
        session.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms > 0 else 0.0
        ctx.metrics.authentication_succeeded()
    return True


@handles(36, (0, 2))
async def handle_sasl_authenticate(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    conn = request.connection
    session = conn.session
    if session is None or session.sasl is None:
        if session is not None and not session.authenticated:
            # mid-handshake on a SASL listener: Kafka's authenticator ends the connection
            session.close_after_response = True
            return _answer(ErrorCode.ILLEGAL_SASL_STATE,
                           "SaslAuthenticate without a SaslHandshake first")
        # an authenticated connection (PLAINTEXT, SSL, or SASL done): Kafka's request
        # handler answers ILLEGAL_SASL_STATE and the connection goes on serving
        return _answer(ErrorCode.ILLEGAL_SASL_STATE,
                       "SaslAuthenticate request received after successful authentication")
    server = session.sasl
    try:
        token = await server.step(bytes(request.body["auth_bytes"]))
    except SaslFailed as exc:
        return await _failed(ctx, request, str(exc))
    if not server.complete:
        return _answer(ErrorCode.NONE, "", token)
    principal = "User:" + str(server.username)
    if session.authenticated and principal != session.principal:
        return await _failed(ctx, request, "Cannot change principals during "
                             f"re-authentication from {session.principal}: {principal}")
    session.principal = principal
    session.authenticated = True
    session.sasl = None
    lifetime_ms = int(ctx.config["connections.max.reauth.ms"])
    session.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms > 0 else 0.0
    ctx.metrics.authentication_succeeded()
    return _answer(ErrorCode.NONE, "", token, lifetime_ms)


async def _failed(ctx: BrokerContext, request: Request, message: str) -> dict[str, Any]:
    conn = request.connection
    log.info("Failed authentication with /%s (%s)", conn.host, message)
    ctx.metrics.authentication_failed()
    assert conn.session is not None
    conn.session.close_after_response = True
    conn.session.sasl = None
    await anyio.sleep(FAILED_AUTHENTICATION_DELAY_S)
    return _answer(ErrorCode.SASL_AUTHENTICATION_FAILED, message)


def _answer(code: ErrorCode, message: str | None, token: bytes = b"",
            lifetime_ms: int = 0) -> dict[str, Any]:
    # success: "" as Kafka's SaslServerAuthenticator, which leaves the message unset
    # (the schema's default for this nullable string is "")
    return {"error_code": int(code), "error_message": message, "auth_bytes": token,
            "session_lifetime_ms": lifetime_ms}
