"""The security counters in the Prometheus exposition."""

from __future__ import annotations

from pybroker.metrics import BrokerMetrics
from pybroker.metrics.exposition import render


def test_security_counters_are_exposed() -> None:
    metrics = BrokerMetrics()
    metrics.authentication_failed()
    metrics.authentication_succeeded()
    metrics.authentication_succeeded()
    metrics.authorization_failed()
    metrics.throttled("Produce", 250)
    text = render(metrics)
    assert 'pybroker_authentications_total{result="failure"} 1' in text
    assert 'pybroker_authentications_total{result="success"} 2' in text
    assert "pybroker_authorizations_failed_total 1" in text
    assert 'pybroker_throttle_time_ms_total{quota="Produce"} 250' in text
