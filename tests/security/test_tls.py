"""TLS listeners with real clients over real TLS (certificates made by the tests):
aiokafka over SSL, confluent-kafka with a client certificate (ssl.client.auth=
required), and the failures: a plaintext client on the TLS port, an untrusted
client certificate, none at all. The broker stays up through each."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import _api_versions_ok
from tests.security.certs import Pki
from tests.security.conftest import SecuredFactory, tls_overrides

TIMEOUT_S = 30.0


def _confluent_ssl(pki: Pki, port: int, *, cert: bool = True) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca), "socket.timeout.ms": 10000,
    }
    if cert:
        conf.update({"ssl.certificate.location": str(pki.client_cert),
                     "ssl.key.location": str(pki.client_key)})
    return conf


def _roundtrip_confluent(conf: dict[str, object], topic: str, count: int = 200) -> list[bytes]:
    producer = Producer({**conf, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i + b"x" * 20000 * (i % 3 == 0))
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**conf, "group.id": "g-" + uuid.uuid4().hex,
                         "enable.auto.commit": False, "fetch.max.bytes": 1 << 20})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < count and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=500, timeout=1):
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    consumer.close()
    return values


def test_confluent_kafka_over_mutual_tls(secured_broker: SecuredFactory, pki: Pki,
                                         topic_name: str) -> None:
    broker, ports = secured_broker({"SSL": "SSL"},
                                   tls_overrides(pki, {"ssl.client.auth": "required"}))
    values = _roundtrip_confluent(_confluent_ssl(pki, ports["SSL"]), topic_name)
    assert len(values) == 200
    assert values[0].startswith(b"v0") and len(values[0]) == 20002
    assert values[199] == b"v199"


def test_aiokafka_over_ssl_with_pkcs12_keystore(secured_broker: SecuredFactory, pki: Pki,
                                                topic_name: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    broker, ports = secured_broker({"SSL": "SSL"}, {
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.pkcs12_keystore),
        "ssl.keystore.password": "key-secret"})
    bootstrap = f"127.0.0.1:{ports['SSL']}"

    async def run() -> list[bytes]:
        context = create_ssl_context(cafile=str(pki.ca))
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL",
                                    ssl_context=context)
        await producer.start()
        try:
            for i in range(50):
                await producer.send_and_wait(topic_name, b"m%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=bootstrap,
                                    security_protocol="SSL", ssl_context=context,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(TIMEOUT_S):
                while len(got) < 50:
                    batch = await consumer.getmany(timeout_ms=1000)
                    for records in batch.values():
                        got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"m%d" % i for i in range(50)]


def _raw_api_versions(sock: socket.socket) -> int:
    client_id = b"raw"
    header = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    sock.sendall(struct.pack(">i", len(header)) + header)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    body = _recv_exact(sock, size)
    return int(struct.unpack(">ih", body[:6])[1])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def test_failures_end_the_connection_and_the_broker_stays_up(
        secured_broker: SecuredFactory, pki: Pki) -> None:
    broker, ports = secured_broker({"SSL": "SSL"},
                                   tls_overrides(pki, {"ssl.client.auth": "required"}))
    port = ports["SSL"]
    # a plaintext Kafka request on the TLS port: not a ClientHello, the connection closes
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with pytest.raises((ConnectionError, OSError)):
            _raw_api_versions(sock)
    # an untrusted client certificate, and none at all, fail the handshake
    for cert, key in ((pki.rogue_cert, pki.rogue_key), (None, None)):
        context = ssl.create_default_context(cafile=str(pki.ca))
        if cert is not None:
            context.load_cert_chain(str(cert), str(key))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    # TLS 1.3: the server's verdict on the certificate comes after the
                    # client's side of the handshake, with the first read
                    _raw_api_versions(tls)
    # the trusted certificate works, on the same broker, as does PLAINTEXT
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert _raw_api_versions(tls) == 0
    assert _api_versions_ok("127.0.0.1", broker.port)
    assert broker.running


def test_a_bad_keystore_password_fails_the_start(broker_factory, pki: Pki) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(start=False)
    b.overrides.update(tls_overrides(pki, {"ssl.key.password": "wrong"}))
    b.overrides["listeners"] = f"SSL://127.0.0.1:{b.port}"
    import subprocess

    proc = subprocess.run(b.command(), capture_output=True, timeout=60)
    assert proc.returncode != 0
    assert b"cannot load keystore" in proc.stderr + proc.stdout


def test_client_certificate_principal_is_the_dn(secured_broker: SecuredFactory, pki: Pki,
                                                topic_name: str) -> None:
    """ACLs name an mTLS client as Kafka does: User:<RFC 2253 DN of its certificate>."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    broker, ports = secured_broker({"SSL": "SSL"}, tls_overrides(pki, {
        "ssl.client.auth": "required",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS"}))  # the PLAINTEXT listener administers
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    other = topic_name + "-other"
    for future in admin.create_topics([NewTopic(topic_name, 1, 1),
                                       NewTopic(other, 1, 1)]).values():
        future.result(TIMEOUT_S)
    binding = AclBinding(ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL,
                         "User:CN=client,OU=test", "*", AclOperation.WRITE,
                         AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(TIMEOUT_S)
    conf = _confluent_ssl(pki, ports["SSL"])

    def produce(topic: str) -> KafkaError | None:
        errors: list[KafkaError | None] = []
        producer = Producer({**conf, "message.timeout.ms": 8000, "retries": 0})
        producer.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(TIMEOUT_S)
        return errors[0] if errors else KafkaError(KafkaError._TIMED_OUT)

    assert produce(topic_name) is None
    err = produce(other)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
