"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials in Kafka's
stored form and the server side of the exchange.

A credential is what Kafka keeps in /config/users/<user> under the mechanism's
name: `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`, where
SaltedPassword = PBKDF2-HMAC(password, salt, iterations), StoredKey =
H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key").
The password itself is never stored."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import os
from collections.abc import Awaitable, Callable

#: mechanism -> (hash name, Kafka's ScramMechanism type byte)
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
BY_TYPE = {t: name for name, (_, t) in MECHANISMS.items()}
#: Kafka's bounds on iterations (ScramMechanism.minIterations / maxIterations)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class SaslFailed(Exception):
    """Authentication failed; the message goes to the client."""


@dataclasses.dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def from_salted_password(mechanism: str, salted: bytes, salt: bytes,
                         iterations: int) -> ScramCredential:
    hash_name = MECHANISMS[mechanism][0]
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(hash_name, client_key).digest(),
                           _hmac(hash_name, salted, b"Server Key"), iterations)


def from_password(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                  salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    salted = hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode(), salt, iterations)
    return from_salted_password(mechanism, salted, salt, iterations)


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslFailed(f"Invalid SCRAM message: {message!r}")
        out.append((part[0], part[2:]))
    return out


def _username(saslname: str) -> str:
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise SaslFailed("Invalid username")
    return saslname.replace("=2C", ",").replace("=3D", "=")


CredentialLookup = Callable[[str, str], Awaitable["ScramCredential | None"]]


class ScramServer:
    """The server's two steps: client-first -> server-first, client-final ->
    server-final. `username` is set once the exchange has succeeded."""

    def __init__(self, mechanism: str, lookup: CredentialLookup,
                 server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        # alphanumeric, as Kafka's (some clients mishandle '+' and '/' in a nonce);
        # given only by tests (RFC 7677's example exchange)
        self._server_nonce = server_nonce or os.urandom(16).hex()
        self.hash_name = MECHANISMS[mechanism][0]
        self.lookup = lookup
        self.username: str | None = None
        self._state = "first"
        self._user = ""
        self._nonce = ""
        self._gs2 = ""
        self._first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None

    @property
    def complete(self) -> bool:
        return self._state == "done"

    async def step(self, token: bytes) -> bytes:
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise SaslFailed("Invalid SCRAM message (not UTF-8)") from None
        if self._state == "first":
            return await self._client_first(message)
        if self._state == "final":
            return self._client_final(message)
        raise SaslFailed("Unexpected SASL request after the exchange completed")

    async def _client_first(self, message: str) -> bytes:
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise SaslFailed("Invalid SCRAM client first message (channel binding is not "
                             "supported)")
        authzid = parts[1][2:] if parts[1].startswith("a=") else ""
        self._gs2 = f"{parts[0]},{parts[1]},"
        self._first_bare = parts[2]
        attrs = _attributes(parts[2])
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise SaslFailed("Invalid SCRAM client first message")
        self._user = _username(attrs[0][1])
        if authzid and _username(authzid) != self._user:
            raise SaslFailed("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        credential = await self.lookup(self._user, self.mechanism)
        if credential is None:
            raise SaslFailed("Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {self.mechanism}")
        self._credential = credential
        self._nonce = attrs[1][1] + self._server_nonce
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_b64 = message.rpartition(",p=")
        attrs = dict(_attributes(without_proof)) if sep else {}
        if not sep or "c" not in attrs or "r" not in attrs:
            raise SaslFailed("Invalid SCRAM client final message")
        # Kafka's check (ScramSaslServer): the nonce ends with the server-first one;
        # librdkafka before 2.1 sends the client nonce twice
        if not attrs["r"].endswith(self._nonce):
            raise SaslFailed("Invalid SCRAM client final message: nonce mismatch")
        if base64.b64decode(attrs["c"]) != self._gs2.encode():
            raise SaslFailed("Invalid SCRAM client final message: channel binding mismatch")
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.hash_name, credential.stored_key, auth_message)
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            proof = b""
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=False))
        if (len(proof) != len(signature) or not hmac.compare_digest(
                hashlib.new(self.hash_name, client_key).digest(), credential.stored_key)):
            raise SaslFailed("Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {self.mechanism}")
        server_signature = _hmac(self.hash_name, credential.server_key, auth_message)
        self._state = "done"
        self.username = self._user
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side (inter-broker connections): client-first, then the proof."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.hash_name = MECHANISMS[mechanism][0]
        self.username = username
        self.password = password
        self._nonce = os.urandom(16).hex()
        self._first_bare = ""
        self._server_signature = b""

    def first(self) -> bytes:
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={self._nonce}"
        return ("n,," + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = dict(_attributes(text))
        nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        if not nonce.startswith(self._nonce):
            raise SaslFailed("SCRAM server nonce does not extend the client's")
        salted = hashlib.pbkdf2_hmac(self.hash_name, self.password.encode(), salt, iterations)
        client_key = _hmac(self.hash_name, salted, b"Client Key")
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = _hmac(self.hash_name, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self.hash_name, salted, b"Server Key")
        self._server_signature = _hmac(self.hash_name, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        if server_final != b"v=" + base64.b64encode(self._server_signature):
            raise SaslFailed("SCRAM server signature does not match")
