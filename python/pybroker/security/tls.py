"""TLS on SSL and SASL_SSL listeners: the server context from Kafka's `ssl.*`
settings, the handshake, the certificate principal, and a socket adapter the
connection drives like a plain socket.

Keystores: PEM (`ssl.keystore.type=PEM`: the private key, encrypted PKCS#8 or
not, and the certificate chain in one file; `ssl.key.password` decrypts it) and
PKCS12 (read with the `cryptography` package when it is installed); Java's JKS
is refused with a message. Truststores: PEM or PKCS12.

`ssl.client.auth` (none / requested / required) applies to SSL listeners; a
SASL_SSL listener asks for a client certificate only when its own
`listener.name.<l>.ssl.client.auth` says so, as in Kafka.

Sendfile cannot encrypt, so a TLS connection reads log bytes and sends them
through OpenSSL (Connection.zero_copy is off). Kernel TLS would restore the
zero-copy path, but needs ssl.OP_ENABLE_KTLS (Python 3.12+) and the kernel's
`tls` module; `ktls_available()` says whether this host has both."""

from __future__ import annotations

import logging
import os
import socket
import ssl
import tempfile
from collections.abc import Sequence

import anyio

from pybroker.config import BrokerConfig, ConfigError
from pybroker.security.settings import listener_has, listener_value
from pybroker.server.listeners import Listener

log = logging.getLogger(__name__)

#: TLS listeners' security protocols
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
#: a client has this long to complete the TLS handshake
HANDSHAKE_TIMEOUT_S = 10.0
#: bytes handed to one SSL_write (a retry after WANT_WRITE must offer the same bytes,
#: which re-joining the same views up to this bound does)
SEND_CHUNK_BYTES = 256 * 1024

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

# X.500 attribute names as Python's getpeercert() gives them -> the keywords Java's
# X500Principal.getName() (RFC 2253) writes; others are written as OIDs by Java
_RFC2253_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L",
    "stateOrProvinceName": "ST", "organizationName": "O", "organizationalUnitName": "OU",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}
_EMAIL_OID = "1.2.840.113549.1.9.1"


def ktls_available() -> bool:
    """Kernel TLS needs OpenSSL's option (Python 3.12+) and the kernel's tls ULP."""
    if not hasattr(ssl, "OP_ENABLE_KTLS"):
        return False
    try:
        with open("/proc/sys/net/ipv4/tcp_available_ulp") as f:
            return "tls" in f.read().split()
    except OSError:
        return False


def client_auth(config: BrokerConfig, listener: Listener) -> str:
    """Kafka's rule: the unprefixed ssl.client.auth is for SSL listeners only."""
    if listener.security_protocol == "SSL" or listener_has(config, listener.name,
                                                           "ssl.client.auth"):
        return str(listener_value(config, listener.name, "ssl.client.auth"))
    return "none"


def server_context(config: BrokerConfig, listener: Listener) -> ssl.SSLContext:
    """The SSLContext of a TLS listener; ConfigError names what is wrong."""
    name = listener.name

    def get(key: str) -> object:
        return listener_value(config, name, key)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [_TLS_VERSIONS[v] for v in get("ssl.enabled.protocols")  # type: ignore[attr-defined]
                if v in _TLS_VERSIONS]
    if not versions:
        raise ConfigError(f"listener {name}: ssl.enabled.protocols has no TLSv1.2 or TLSv1.3")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        ctx.set_ciphers(":".join(ciphers))  # type: ignore[arg-type]
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    location = get("ssl.keystore.location")
    if not location:
        raise ConfigError(f"listener {name} ({listener.security_protocol}) needs "
                          "ssl.keystore.location")
    try:
        _load_keystore(ctx, str(get("ssl.keystore.type")), str(location),
                       _opt(get("ssl.keystore.password")), _opt(get("ssl.key.password")))
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"listener {name}: cannot load keystore {location}: {exc}") from None
    auth = client_auth(config, listener)
    truststore = get("ssl.truststore.location")
    if truststore:
        try:
            _load_truststore(ctx, str(get("ssl.truststore.type")), str(truststore),
                             _opt(get("ssl.truststore.password")))
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(f"listener {name}: cannot load truststore {truststore}: "
                              f"{exc}") from None
    elif auth != "none":
        raise ConfigError(f"listener {name}: ssl.client.auth={auth} needs "
                          "ssl.truststore.location")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    return ctx


def server_contexts(config: BrokerConfig, listeners: Sequence[Listener]
                    ) -> dict[str, ssl.SSLContext]:
    """A context per TLS listener, by listener name (checked before anything starts)."""
    return {lis.name: server_context(config, lis) for lis in listeners
            if lis.security_protocol in TLS_PROTOCOLS}


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def _load_keystore(ctx: ssl.SSLContext, kind: str, location: str,
                   store_password: str | None, key_password: str | None) -> None:
    if kind == "PEM":
        # never OpenSSL's terminal prompt: a missing password is a wrong one
        ctx.load_cert_chain(location, password=key_password if key_password is not None
                            else (lambda: b""))
        return
    if kind == "PKCS12":
        key_pem, chain_pem, _ = _read_pkcs12(location, store_password)
        if not key_pem:
            raise ValueError("the PKCS12 keystore has no private key")
        # load_cert_chain reads files only: a private file that is gone at once
        with tempfile.TemporaryDirectory(prefix="pybroker-tls-") as tmp:
            path = os.path.join(tmp, "keystore.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key_pem + chain_pem)
            ctx.load_cert_chain(path)
        return
    raise ValueError(f"ssl.keystore.type={kind} is not supported (use PEM or PKCS12)")


def _load_truststore(ctx: ssl.SSLContext, kind: str, location: str,
                     password: str | None) -> None:
    if kind == "PEM":
        ctx.load_verify_locations(cafile=location)
        return
    if kind == "PKCS12":
        _, chain_pem, extra_pem = _read_pkcs12(location, password)
        ctx.load_verify_locations(cadata=(chain_pem + extra_pem).decode())
        return
    raise ValueError(f"ssl.truststore.type={kind} is not supported (use PEM or PKCS12)")


def _read_pkcs12(location: str, password: str | None) -> tuple[bytes, bytes, bytes]:
    """(key PEM, certificate PEM, other certificates PEM) of a PKCS12 file."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ValueError("PKCS12 stores need the 'cryptography' package") from None
    with open(location, "rb") as f:
        data = f.read()
    key, cert, extra = pkcs12.load_key_and_certificates(
        data, password.encode() if password else None)
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()) if key is not None else b""
    cert_pem = cert.public_bytes(pem) if cert is not None else b""
    extra_pem = b"".join(c.public_bytes(pem) for c in extra)
    return key_pem, cert_pem + (extra_pem if key is not None else b""), extra_pem


async def handshake(sock: ssl.SSLSocket, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
    """Complete the server side of the handshake on a non-blocking socket.
    Raises ssl.SSLError / OSError when it fails, TimeoutError when it takes too long."""
    fd = sock.fileno()
    with anyio.fail_after(timeout_s):
        while True:
            try:
                sock.do_handshake()
                return
            except ssl.SSLWantReadError:
                await anyio.wait_readable(fd)
            except ssl.SSLWantWriteError:
                await anyio.wait_writable(fd)


def certificate_principal(sock: ssl.SSLSocket) -> str | None:
    """`User:<DN>` of a verified client certificate, the DN as Java's
    X500Principal.getName() writes it (RFC 2253: last RDN first); None without one."""
    cert = sock.getpeercert()
    if not cert:
        return None
    return "User:" + rfc2253(cert.get("subject", ()))  # type: ignore[arg-type]


def rfc2253(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for attr, value in rdn:
            if attr == "emailAddress":  # Java: the OID and the hex of the DER IA5String
                raw = value.encode()
                parts.append(f"{_EMAIL_OID}=#16{len(raw):02x}{raw.hex()}")
                continue
            parts.append(f"{_RFC2253_KEYWORDS.get(attr, attr)}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


class TlsSocket:
    """An SSLSocket with the non-blocking plain-socket surface Connection uses:
    OpenSSL's want-read / want-write become BlockingIOError, and sendmsg sends
    the views' bytes through SSL_write."""

    __slots__ = ("ssl",)

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.ssl = sock

    def fileno(self) -> int:
        return self.ssl.fileno()

    def setblocking(self, flag: bool) -> None:
        self.ssl.setblocking(flag)

    def getpeername(self) -> tuple[str, int]:
        return self.ssl.getpeername()  # type: ignore[no-any-return]

    def recv_into(self, buffer: memoryview | bytearray, nbytes: int = 0) -> int:
        try:
            return self.ssl.recv_into(buffer, nbytes)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError() from None
        except ssl.SSLZeroReturnError:  # close_notify: the peer is done
            return 0

    def recv(self, size: int, flags: int = 0) -> bytes:
        """Raw bytes (MSG_PEEK: is the peer still there?), below TLS."""
        return socket.socket.recv(self.ssl, size, flags)

    def sendmsg(self, views: Sequence[memoryview]) -> int:
        chunk = bytearray()
        for view in views:
            room = SEND_CHUNK_BYTES - len(chunk)
            if room <= 0:
                break
            chunk += view[:room]
        try:
            return self.ssl.send(chunk)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError() from None

    def close(self) -> None:
        self.ssl.close()
