"""Dynamic broker configs on a single node (the embedded store): `pybroker configs
--entity-type brokers` changes them without a restart, DescribeConfigs shows their
sources, and they survive a restart (kept in the metadata file)."""

from __future__ import annotations

import os
import subprocess
import sys

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from tests.conftest import BrokerFactory

TIMEOUT_S = 60


def tool(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "pybroker", *args], capture_output=True,
                            text=True, timeout=TIMEOUT_S, env={**os.environ})
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def broker_entries(bootstrap: str) -> dict[str, object]:
    resource = ConfigResource(ResourceType.BROKER, "0")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_configs([resource])[resource].result(TIMEOUT_S)


def test_dynamic_configs_on_one_node_survive_restart(broker_factory: BrokerFactory) -> None:
    b = broker_factory({"log.retention.hours": "100"})
    base = ["configs", "--bootstrap-server", b.bootstrap, "--entity-type", "brokers"]
    tool(*base, "--entity-default", "--alter", "--add-config", "log.retention.hours=50")
    tool(*base, "--entity-name", "0", "--alter", "--add-config", "log.retention.hours=25")
    entry = broker_entries(b.bootstrap)["log.retention.hours"]
    assert entry.value == "25"  # type: ignore[attr-defined]
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value  # type: ignore[attr-defined]
    # (librdkafka keys synonyms by name, so a key set in several layers shows as one:
    # the tool's own client lists every layer)
    lines = tool(*base, "--entity-name", "0", "--describe").splitlines()
    assert lines == [
        "Dynamic configs for broker 0 are:",
        "  log.retention.hours=25 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.hours=25, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=50, "
        "STATIC_BROKER_CONFIG:log.retention.hours=100, DEFAULT_CONFIG:log.retention.hours=168}"]
    b.restart()
    entry = broker_entries(b.bootstrap)["log.retention.hours"]
    assert entry.value == "25"  # type: ignore[attr-defined]
    tool(*base, "--entity-name", "0", "--alter", "--delete-config", "log.retention.hours")
    entry = broker_entries(b.bootstrap)["log.retention.hours"]
    assert entry.value == "50"  # type: ignore[attr-defined]
    assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value  # type: ignore[attr-defined]


def test_incremental_ops_on_the_cluster_default(broker_factory: BrokerFactory) -> None:
    """APPEND to a LIST key starts from its effective value; validate_only stores
    nothing; a bad value is INVALID_CONFIG (raw requests: librdkafka refuses the
    default's empty resource name)."""
    from pybroker.tools._wire import WireClient

    b = broker_factory()
    append, set_ = 2, 0

    def alter(client: WireClient, name: str, value: str, op: int,
              validate_only: bool = False) -> int:
        answer = client.request(44, {"resources": [{
            "resource_type": 4, "resource_name": "",
            "configs": [{"name": name, "config_operation": op, "value": value}]}],
            "validate_only": validate_only})
        return int(answer["responses"][0]["error_code"])

    with WireClient(b.bootstrap, 10000) as client:
        assert alter(client, "log.cleanup.policy", "compact", append) == 0
        assert alter(client, "log.retention.ms", "1000", set_, validate_only=True) == 0
        assert alter(client, "log.retention.ms", "soon", set_) == 40  # INVALID_CONFIG
    entries = broker_entries(b.bootstrap)
    assert entries["log.cleanup.policy"].value == "delete,compact"  # type: ignore[attr-defined]
    assert entries["log.retention.ms"].value is None  # type: ignore[attr-defined]


def _api_versions_ok(bootstrap: str) -> bool:
    """One ApiVersions round trip on a new connection; False when the broker closes it."""
    import socket

    from pybroker import protocol

    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"".join(bytes(p) for p in protocol.encode_request(18, 0, 1, "t", {})))
        try:
            return len(sock.recv(4)) == 4
        except ConnectionResetError:
            return False


def test_connection_limits_change_without_restart(broker_factory: BrokerFactory) -> None:
    """max.connections.per.ip is one of Kafka's dynamic keys: lowered at run time, a
    second connection from the same address is closed; removed, it is served again."""
    import socket

    b = broker_factory()
    base = ["configs", "--bootstrap-server", b.bootstrap, "--entity-type", "brokers",
            "--entity-default", "--alter"]
    # 2, not 1: a tool opens two connections one after the other (its fail-fast probe,
    # then the client's), and the client's may arrive before the broker has noticed the
    # probe's close
    tool(*base, "--add-config", "max.connections.per.ip=2")
    host, _, port = b.bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10), \
            socket.create_connection((host, int(port)), timeout=10):
        assert not _api_versions_ok(b.bootstrap)  # the third from 127.0.0.1
    # the first two are closed now (once the broker has noticed)
    assert _eventually(lambda: _api_versions_ok(b.bootstrap))
    tool(*base, "--delete-config", "max.connections.per.ip")
    with socket.create_connection((host, int(port)), timeout=10), \
            socket.create_connection((host, int(port)), timeout=10):
        assert _api_versions_ok(b.bootstrap)


def _eventually(check: object, timeout_s: float = 30.0) -> bool:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False
