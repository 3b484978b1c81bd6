"""The users / clients part of `pybroker configs` (client quotas and SCRAM
credentials, kafka-configs.sh's forms), run against a broker with SASL on."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from confluent_kafka import Producer

from pybroker.tools._user_client_configs import parse_add_config, run
from tests.security.certs import Pki
from tests.security.conftest import SecuredFactory
from tests.security.test_sasl import _sasl_broker, _scram_conf


def _args(bootstrap: str, **kw: object) -> argparse.Namespace:
    base = {"bootstrap_server": bootstrap, "command_config": None, "entity_type": "users",
            "entity_name": None, "entity_default": False, "describe": False, "alter": False,
            "add_config": [], "delete_config": []}
    base.update(kw)
    return argparse.Namespace(**base)


def test_add_config_keeps_bracketed_values() -> None:
    assert parse_add_config("producer_byte_rate=1024,SCRAM-SHA-512=[iterations=8192,"
                            "password=a,b]") == {
        "producer_byte_rate": "1024", "SCRAM-SHA-512": "[iterations=8192,password=a,b]"}


def test_quotas_and_scram_credentials(secured_broker: SecuredFactory, pki: Pki,
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    broker, ports = _sasl_broker(secured_broker, pki)
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                     f"ssl.truststore.location={pki.ca}\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                     'required username="admin" password="admin-secret";\n')
    bootstrap = f"127.0.0.1:{ports['SASL_SSL']}"
    assert run(_args(bootstrap, command_config=str(props), alter=True, entity_name="frank",
                     add_config=["producer_byte_rate=1024,SCRAM-SHA-512=[iterations=8192,"
                                 "password=frank-pw]"])) == 0
    assert run(_args(bootstrap, command_config=str(props), alter=True, entity_type="clients",
                     entity_default=True, add_config=["consumer_byte_rate=2048"])) == 0
    capsys.readouterr()
    assert run(_args(bootstrap, command_config=str(props), describe=True,
                     entity_name="frank")) == 0
    out = capsys.readouterr().out
    assert "Quota configs for user-principal 'frank' are producer_byte_rate=1024.0" in out
    assert "SCRAM credential configs for user-principal 'frank' are " \
           "SCRAM-SHA-512=iterations=8192" in out
    assert run(_args(bootstrap, command_config=str(props), describe=True,
                     entity_type="clients", entity_default=True)) == 0
    assert "Quota configs for client-id the default are consumer_byte_rate=2048.0" in \
        capsys.readouterr().out
    # the credential works for a real client
    producer = Producer(_scram_conf(pki, ports["SASL_SSL"], "frank", "frank-pw"))
    producer.produce("frank-topic", b"hello")
    assert producer.flush(30) == 0
    assert run(_args(bootstrap, command_config=str(props), alter=True, entity_name="frank",
                     delete_config=["SCRAM-SHA-512,producer_byte_rate"])) == 0
    capsys.readouterr()
    run(_args(bootstrap, command_config=str(props), describe=True, entity_name="frank"))
    assert capsys.readouterr().out == ""


def test_through_the_configs_tool(broker_factory) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    broker = broker_factory()

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pybroker", "configs",
                               "--bootstrap-server", broker.bootstrap, *args],
                              capture_output=True, text=True, timeout=60)

    done = tool("--alter", "--entity-type", "users", "--entity-name", "gina", "--add-config",
                "producer_byte_rate=4096,SCRAM-SHA-256=[iterations=4096,password=g]")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Completed updating config for user gina." in done.stdout
    shown = tool("--describe", "--entity-type", "users", "--entity-name", "gina").stdout
    assert "Quota configs for user-principal 'gina' are producer_byte_rate=4096.0" in shown
    assert "SCRAM-SHA-256=iterations=4096" in shown
    assert tool("--alter", "--entity-type", "users", "--entity-name", "gina",
                "--delete-config", "producer_byte_rate").returncode == 0
    assert "Quota configs" not in tool("--describe", "--entity-type", "users",
                                       "--entity-name", "gina").stdout
