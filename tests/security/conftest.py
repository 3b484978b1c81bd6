"""Fixtures of the security tests: certificates, and brokers with secured listeners
next to the PLAINTEXT one the shared fixture waits on."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Broker, free_port
from tests.security.certs import Pki, make_pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


SecuredFactory = Callable[..., tuple[Broker, dict[str, int]]]


@pytest.fixture
def secured_broker(broker_factory: Callable[..., Broker]) -> SecuredFactory:
    """secured_broker({"SSL": "SSL", ...}, overrides) -> (broker, {listener: port}):
    a PLAINTEXT listener on broker.port plus the named listeners on free ports."""

    def start(listeners: dict[str, str], overrides: dict[str, str] | None = None
              ) -> tuple[Broker, dict[str, int]]:
        b = broker_factory(overrides or {}, start=False)
        ports = {name: free_port() for name in listeners}
        b.overrides["listeners"] = ",".join(
            [f"PLAINTEXT://127.0.0.1:{b.port}"]
            + [f"{name}://127.0.0.1:{port}" for name, port in ports.items()])
        b.overrides["listener.security.protocol.map"] = ",".join(
            ["PLAINTEXT:PLAINTEXT"] + [f"{n}:{p}" for n, p in listeners.items()])
        b.start()
        return b, ports

    return start


def tls_overrides(pki: Pki, extra: dict[str, str] | None = None) -> dict[str, str]:
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystore),
        "ssl.key.password": "key-secret",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
    }
    settings.update(extra or {})
    return settings
