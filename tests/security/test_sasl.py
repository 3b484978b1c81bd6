"""SASL with real clients: confluent-kafka over SASL_SSL with SCRAM-SHA-512 (the
credential made with AlterUserScramCredentials), kafka-python over SASL_PLAINTEXT
with PLAIN (users from the JAAS line), kcat with SCRAM; and the failures: wrong
passwords, unknown users, requests before authentication, an expired session.
The broker stays up through each."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.conftest import Broker, _api_versions_ok
from tests.security.certs import Pki
from tests.security.conftest import SecuredFactory, tls_overrides

TIMEOUT_S = 30.0
JAAS_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret" user_bob="bob-secret";')


def _sasl_broker(secured_broker: SecuredFactory, pki: Pki,
                 extra: dict[str, str] | None = None) -> tuple[Broker, dict[str, int]]:
    settings = tls_overrides(pki, {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_PLAIN,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS_PLAIN,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        **(extra or {})})
    return secured_broker({"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"},
                          settings)


def _add_scram_user(bootstrap: str, user: str, password: str,
                    mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_512) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, 8192), password.encode())])
    for future in futures.values():
        future.result(TIMEOUT_S)


def _scram_conf(pki: Pki, port: int, user: str, password: str) -> dict[str, object]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca), "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password}


def test_confluent_kafka_sasl_ssl_scram_sha_512(secured_broker: SecuredFactory, pki: Pki,
                                                topic_name: str) -> None:
    broker, ports = _sasl_broker(secured_broker, pki)
    _add_scram_user(broker.bootstrap, "alice", "alice-secret")
    conf = _scram_conf(pki, ports["SASL_SSL"], "alice", "alice-secret")
    producer = Producer(conf)
    for i in range(100):
        producer.produce(topic_name, value=b"s%d" % i)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**conf, "group.id": "g-" + uuid.uuid4().hex,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < 100 and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=100, timeout=1):
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    consumer.close()
    assert got == [b"s%d" % i for i in range(100)]


def test_scram_credentials_are_described_and_deleted(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory()
    _add_scram_user(broker.bootstrap, "carol", "pw-1")
    _add_scram_user(broker.bootstrap, "carol", "pw-2", ScramMechanism.SCRAM_SHA_256)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(TIMEOUT_S)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 8192)]
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(TIMEOUT_S)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])
    futures["carol"].result(TIMEOUT_S)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(TIMEOUT_S)
    assert [i.mechanism for i in described.scram_credential_infos] == [
        ScramMechanism.SCRAM_SHA_512]
    # survives a restart: the credential is in the metadata store, not in memory
    broker.restart()
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(TIMEOUT_S)
    assert len(described.scram_credential_infos) == 1


def test_kafka_python_sasl_plaintext_plain(secured_broker: SecuredFactory, pki: Pki,
                                           topic_name: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    broker, ports = _sasl_broker(secured_broker, pki)
    common = {"bootstrap_servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
              "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
              "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret"}
    producer = KafkaProducer(**common)
    for i in range(20):
        producer.send(topic_name, b"p%d" % i)
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(topic_name, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, **common)
    got = [m.value for _, m in zip(range(20), consumer, strict=False)]
    consumer.close()
    assert got == [b"p%d" % i for i in range(20)]


def test_kcat_sasl_scram(secured_broker: SecuredFactory, pki: Pki, topic_name: str) -> None:
    broker, ports = _sasl_broker(secured_broker, pki)
    _add_scram_user(broker.bootstrap, "dave", "dave-secret")
    args = ["kcat", "-b", f"127.0.0.1:{ports['SASL_SSL']}", "-X", "security.protocol=SASL_SSL",
            "-X", f"ssl.ca.location={pki.ca}", "-X", "sasl.mechanisms=SCRAM-SHA-512",
            "-X", "sasl.username=dave", "-X", "sasl.password=dave-secret"]
    subprocess.run(args + ["-P", "-t", topic_name], input=b"one\ntwo\n", check=True,
                   timeout=60)
    out = subprocess.run(args + ["-C", "-t", topic_name, "-o", "beginning", "-e", "-q"],
                         check=True, capture_output=True, timeout=60).stdout
    assert out.split() == [b"one", b"two"]


def _auth_error(conf: dict[str, object]) -> str:
    """The error a producer's first request hits (authentication), as text."""
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e)),
                         "message.timeout.ms": 5000})
    producer.produce("anything", b"x")
    deadline = time.monotonic() + TIMEOUT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.5)
    producer.purge()
    producer.flush(5)
    return errors[0] if errors else ""


def test_wrong_password_and_unknown_user_fail_cleanly(secured_broker: SecuredFactory,
                                                      pki: Pki) -> None:
    broker, ports = _sasl_broker(secured_broker, pki)
    _add_scram_user(broker.bootstrap, "erin", "erin-secret")
    for user, password in (("erin", "wrong"), ("nobody", "whatever")):
        error = _auth_error(_scram_conf(pki, ports["SASL_SSL"], user, password))
        assert "Authentication failed" in error, error
    plain = {"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "bob", "sasl.password": "not-bobs"}
    assert "Invalid username or password" in _auth_error(plain)
    assert _api_versions_ok("127.0.0.1", broker.port)
    assert broker.running


def _request(sock: socket.socket, api_key: int, version: int, body: bytes,
             correlation: int = 1) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation, 3) + b"raw"
    if version >= 2 and api_key == 36:  # flexible: no tagged fields in the header
        header += b"\x00"
    sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    return _recv_exact(sock, size)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def _plain_login(sock: socket.socket, user: str, password: str) -> tuple[int, int]:
    """SaslHandshake v1 + SaslAuthenticate v1 with PLAIN: (error code, session lifetime)."""
    answer = _request(sock, 17, 1, _string("PLAIN"))
    assert struct.unpack(">h", answer[4:6])[0] == 0
    token = b"\x00" + user.encode() + b"\x00" + password.encode()
    answer = _request(sock, 36, 1, struct.pack(">i", len(token)) + token)
    code = struct.unpack(">h", answer[4:6])[0]
    return code, struct.unpack(">q", answer[-8:])[0]


METADATA_V1_ALL = struct.pack(">i", -1)


def test_requests_before_authentication_close_the_connection(
        secured_broker: SecuredFactory, pki: Pki) -> None:
    broker, ports = _sasl_broker(secured_broker, pki)
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        with pytest.raises(ConnectionError):
            _request(sock, 3, 1, METADATA_V1_ALL)
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        answer = _request(sock, 17, 1, _string("GSSAPI"))
        assert struct.unpack(">h", answer[4:6])[0] == 33  # UNSUPPORTED_SASL_MECHANISM
        with pytest.raises(ConnectionError):
            _request(sock, 3, 1, METADATA_V1_ALL)
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        assert _plain_login(sock, "admin", "admin-secret") == (0, 0)
        _request(sock, 3, 1, METADATA_V1_ALL)  # answered once authenticated
    assert broker.running


def test_an_expired_session_is_closed_and_reauthentication_extends_it(
        secured_broker: SecuredFactory, pki: Pki) -> None:
    broker, ports = _sasl_broker(secured_broker, pki, {"connections.max.reauth.ms": "1500"})
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        assert _plain_login(sock, "admin", "admin-secret") == (0, 1500)
        _request(sock, 3, 1, METADATA_V1_ALL)
        time.sleep(1.6)  # the session's lifetime passes (a fixed lifetime, not a race)
        assert _plain_login(sock, "admin", "admin-secret") == (0, 1500)  # KIP-368
        _request(sock, 3, 1, METADATA_V1_ALL)
        # re-authenticating as someone else is refused
        assert _plain_login(sock, "bob", "bob-secret")[0] == 58
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        assert _plain_login(sock, "admin", "admin-secret") == (0, 1500)
        time.sleep(1.6)
        with pytest.raises(ConnectionError):
            _request(sock, 3, 1, METADATA_V1_ALL)
    assert broker.running
