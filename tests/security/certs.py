"""Certificates the security tests make for themselves: a CA, the broker's
keystore (PEM: an encrypted PKCS#8 key, PBE-SHA1-3DES as Java needs it, and the
chain in one file, as Kafka's ssl.keystore.type=PEM takes it) and client
certificates, with the `cryptography` package and the openssl CLI."""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "key-secret"


@dataclasses.dataclass(frozen=True)
class Pki:
    ca: Path
    keystore: Path
    client_cert: Path
    client_key: Path
    #: a client certificate from a CA the broker does not trust
    rogue_cert: Path
    rogue_key: Path
    pkcs12_keystore: Path


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if ou:
        attrs = [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou)] + attrs
    return x509.Name(attrs)


def _cert(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False,
          san: str | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        import ipaddress

        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(san))]),
            critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("pybroker-test-ca")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    (directory / "ca.pem").write_bytes(_pem_cert(ca))

    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert(_name("broker"), server_key, ca_name, ca_key, san="127.0.0.1")
    plain_key = directory / "server-key.pem"
    plain_key.write_bytes(_pem_key(server_key))
    encrypted = subprocess.run(
        ["openssl", "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-in", str(plain_key),
         "-passout", f"pass:{KEY_PASSWORD}"], check=True, capture_output=True).stdout
    plain_key.unlink()
    keystore = directory / "server-keystore.pem"
    keystore.write_bytes(encrypted + _pem_cert(server) + _pem_cert(ca))

    from cryptography.hazmat.primitives.serialization import pkcs12

    p12 = directory / "server-keystore.p12"
    p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", server_key, server, [ca],
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode())))

    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(_name("client", ou="test"), client_key, ca_name, ca_key)
    (directory / "client.pem").write_bytes(_pem_cert(client))
    (directory / "client-key.pem").write_bytes(_pem_key(client_key))

    rogue_ca_key = ec.generate_private_key(ec.SECP256R1())
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue = _cert(_name("rogue"), rogue_key, _name("rogue-ca"), rogue_ca_key)
    (directory / "rogue.pem").write_bytes(_pem_cert(rogue))
    (directory / "rogue-key.pem").write_bytes(_pem_key(rogue_key))
    return Pki(directory / "ca.pem", keystore, directory / "client.pem",
               directory / "client-key.pem", directory / "rogue.pem",
               directory / "rogue-key.pem", p12)
