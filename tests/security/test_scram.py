"""SCRAM without a broker: RFC 7677's SCRAM-SHA-256 example exchange, Kafka's
stored credential form, and the failures."""

from __future__ import annotations

import asyncio
import base64

import pytest

from pybroker.security.sasl import PlainServer, jaas_options
from pybroker.security.scram import SaslFailed, ScramCredential, ScramServer, from_password

RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


def _server(password: str = "pencil") -> ScramServer:
    credential = from_password("SCRAM-SHA-256", password, 4096, RFC_SALT)

    async def lookup(user: str, mechanism: str) -> ScramCredential | None:
        return credential if user == "user" else None

    return ScramServer("SCRAM-SHA-256", lookup, server_nonce=RFC_SERVER_NONCE)


def test_rfc7677_exchange() -> None:
    server = _server()
    first = asyncio.run(server.step(RFC_CLIENT_FIRST))
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = asyncio.run(server.step(RFC_CLIENT_FINAL))
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


def test_wrong_password_and_unknown_user_fail() -> None:
    server = _server("not-pencil")
    asyncio.run(server.step(RFC_CLIENT_FIRST))
    with pytest.raises(SaslFailed, match="invalid credentials"):
        asyncio.run(server.step(RFC_CLIENT_FINAL))
    with pytest.raises(SaslFailed, match="invalid credentials"):
        asyncio.run(_server().step(b"n,,n=mallory,r=abc"))
    with pytest.raises(SaslFailed):
        asyncio.run(_server().step(b"p=tls-unique,,n=user,r=abc"))


def test_credential_round_trips_in_kafkas_form() -> None:
    credential = from_password("SCRAM-SHA-512", "secret", 8192, b"salt")
    text = credential.to_string()
    assert text.startswith("salt=c2FsdA==,stored_key=") and text.endswith(",iterations=8192")
    assert ScramCredential.from_string(text) == credential


def test_plain_and_the_jaas_line() -> None:
    users = {k[5:]: v for k, v in jaas_options(
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="a" user_admin="a" user_bob="b\\"q";').items()
        if k.startswith("user_")}
    assert users == {"admin": "a", "bob": 'b"q'}
    assert asyncio.run(PlainServer(users).step(b'\x00bob\x00b"q')) == b""
    for token in (b"\x00bob\x00wrong", b"\x00eve\x00b", b"alice\x00bob\x00b\"q", b"bob"):
        with pytest.raises(SaslFailed):
            asyncio.run(PlainServer(users).step(token))


def test_scram_client_against_the_server() -> None:
    from pybroker.security.scram import ScramClient

    credential = from_password("SCRAM-SHA-512", "broker-secret", 4096)

    async def lookup(user: str, mechanism: str) -> ScramCredential | None:
        return credential if user == "broker" else None

    async def exchange(password: str) -> None:
        server = ScramServer("SCRAM-SHA-512", lookup)
        client = ScramClient("SCRAM-SHA-512", "broker", password)
        server_first = await server.step(client.first())
        client.verify(await server.step(client.final(server_first)))

    asyncio.run(exchange("broker-secret"))
    with pytest.raises(SaslFailed):
        asyncio.run(exchange("wrong"))
