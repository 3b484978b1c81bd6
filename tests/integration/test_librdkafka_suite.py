"""librdkafka's own integration tests (its tests/ directory, the conformance suite of
the C client confluent-kafka wraps) against a private pybroker, one pytest case per
suite test. Skipped unless LIBRDKAFKA_TESTS names a built tests/ directory (with its
test-runner; see the README's "librdkafka's test suite" for how to build one):

    LIBRDKAFKA_TESTS=/opt/librdkafka/tests pytest tests/integration/test_librdkafka_suite.py

LIBRDKAFKA_TESTS_LIST picks the suite tests (space separated numbers, default the ones
issue 24 fixed: 0011 0081 0113 0119); LIBRDKAFKA_TESTS_MODE=full runs them in full
mode (default quick, the suite's -Q). The broker runs with an ACL authorizer that
allows what no ACL names (0119 adds its ACLs with $KAFKA_PATH/bin/kafka-acls.sh, here
pybroker's acls tool; kafka-topics.sh likewise) and, as the suite's own brokers,
auto-creates topics with 4 partitions; the suite is told it talks to Kafka 4.0.0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import BrokerFactory

SUITE = os.environ.get("LIBRDKAFKA_TESTS")
TESTS = os.environ.get("LIBRDKAFKA_TESTS_LIST", "0011 0081 0113 0119").split()
QUICK = os.environ.get("LIBRDKAFKA_TESTS_MODE", "quick") != "full"
#: bound on one suite test (0113 in full mode takes about 10 minutes here)
TIMEOUT_S = 1800

pytestmark = pytest.mark.skipif(
    not SUITE or not (Path(SUITE) / "test-runner").exists(),
    reason="set LIBRDKAFKA_TESTS to a built librdkafka tests/ directory")


def kafka_path(root: Path) -> Path:
    """A stand-in Kafka distribution: bin/kafka-acls.sh and bin/kafka-topics.sh run
    pybroker's acls and topics tools."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    for name, tool in (("kafka-acls.sh", "acls"), ("kafka-topics.sh", "topics")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pybroker {tool} "$@"\n')
        script.chmod(0o755)
    return root


@pytest.mark.parametrize("number", TESTS)
def test_librdkafka_suite(number: str, broker_factory: BrokerFactory, tmp_path: Path) -> None:
    assert SUITE is not None
    suite = Path(SUITE)
    b = broker_factory({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        # the suite's own brokers (trivup) auto-create topics with 4 partitions, and
        # its tests produce to partitions 0-3 of topics they never created
        "num.partitions": "4"})
    conf = tmp_path / "test.conf"
    # the suite's timeouts assume a JVM tool that answers in a second or two and an
    # idle machine: three times as long
    conf.write_text(f"bootstrap.servers={b.bootstrap}\ntest.timeout.multiplier=3\n")
    libs = [str(suite.parent / "src"), str(suite.parent / "src-cpp")]
    env = {**os.environ, "TESTS": number, "TEST_KAFKA_VERSION": "4.0.0", "BROKERS": b.bootstrap,
           "RDKAFKA_TEST_CONF": str(conf), "KAFKA_PATH": str(kafka_path(tmp_path / "kafka")),
           "LD_LIBRARY_PATH": ":".join([*libs, os.environ.get("LD_LIBRARY_PATH", "")])}
    args = ["./test-runner", "-p1", *(["-Q"] if QUICK else [])]
    result = subprocess.run(args, cwd=suite, env=env, capture_output=True, text=True,
                            timeout=TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"librdkafka test {number} failed:\n{output[-6000:]}"
    assert "PASSED" in output or "SKIPPED" in output, output[-2000:]
