"""librdkafka's own integration tests (its tests/ directory, the conformance suite of
the C client confluent-kafka wraps) against a private pybroker, one pytest case per
suite test, on a single broker and on a 3-broker cluster (real ZooKeeper, three
`pybroker serve` processes, as tests/cluster). Skipped unless LIBRDKAFKA_TESTS names a
built tests/ directory (with its test-runner; see the README's "librdkafka's test
suite" for how to build one):

    LIBRDKAFKA_TESTS=/opt/librdkafka/tests pytest tests/integration/test_librdkafka_suite.py

LIBRDKAFKA_TESTS_LIST picks the suite tests (space separated numbers, default the ones
issue 24 fixed; `all` runs the whole suite in one test-runner against one broker or
cluster, as the suite's own CI does); LIBRDKAFKA_TESTS_MODE=full runs them in full
mode (default quick, the suite's -Q). LIBRDKAFKA_TESTS_GROUP_PROTOCOL=consumer runs the
suite's consumers with KIP-848's consumer group protocol (the suite's own
TEST_CONSUMER_GROUP_PROTOCOL, which sets group.protocol on every consumer it makes and
skips what is classic-only; default classic). The brokers run with an ACL authorizer that
allows what no ACL names (0119 adds its ACLs with $KAFKA_PATH/bin/kafka-acls.sh, here
pybroker's acls tool; kafka-topics.sh likewise) and are configured as the suite's own
(trivup, tests/cluster_testing.py and scenarios/default.json): topics auto-created
with 4 partitions and, in the cluster, 3 replicas, each broker in a rack of its own
(RACK<id>) with the rack-aware replica selector. The suite is told it talks to Kafka
4.0.0 (TEST_KAFKA_VERSION) and finds the brokers in test.conf's bootstrap.servers and
BROKERS; it counts them from Metadata. With KAFKA_HOME (a stock Kafka) the suite's
Java clients run from it (0098). The test-runner's output is kept in the test's
tmp_path (test-runner.log) while it runs.

Results are in tests/integration/LIBRDKAFKA_SUITE.md."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.cluster.cluster import Cluster
from tests.cluster.zookeeper import ZooKeeperServer, zookeeper  # noqa: F401 - fixture

if TYPE_CHECKING:
    from conftest import BrokerFactory

SUITE = os.environ.get("LIBRDKAFKA_TESTS")
KAFKA_HOME = os.environ.get("KAFKA_HOME")
TESTS = os.environ.get("LIBRDKAFKA_TESTS_LIST", "0011 0081 0113 0119").split()
QUICK = os.environ.get("LIBRDKAFKA_TESTS_MODE", "quick") != "full"
GROUP_PROTOCOL = os.environ.get("LIBRDKAFKA_TESTS_GROUP_PROTOCOL", "classic")
assert GROUP_PROTOCOL in ("classic", "consumer"), \
    f"LIBRDKAFKA_TESTS_GROUP_PROTOCOL: classic or consumer, not {GROUP_PROTOCOL!r}"
#: bound on one suite test (0113 in full mode takes about 10 minutes here)
TIMEOUT_S = 1800
#: bound on the whole suite in one run (`all`: about 32 minutes on one broker here)
ALL_TIMEOUT_S = 4 * 3600
#: settings of every broker, as the suite's own (trivup's server.properties)
SUITE_BROKER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    # the suite's own brokers auto-create topics with 4 partitions, and its tests
    # produce to partitions 0-3 of topics they never created
    "num.partitions": "4"}

pytestmark = [
    pytest.mark.skipif(not SUITE or not (Path(SUITE) / "test-runner").exists(),
                       reason="set LIBRDKAFKA_TESTS to a built librdkafka tests/ directory"),
    # the test-runner's own bound (below) plus starting and stopping the brokers
    pytest.mark.timeout(ALL_TIMEOUT_S + 300)]


def kafka_path(root: Path) -> Path:
    """A stand-in Kafka distribution: bin/kafka-acls.sh and bin/kafka-topics.sh run
    pybroker's acls and topics tools; with KAFKA_HOME (a stock Kafka, as tests/java)
    bin/kafka-run-class.sh and libs/ are its own, for the suite's Java clients (0098
    produces with Kafka's transactional producer: tests/java/TransactionProducerCli,
    which the suite compiles against libs/)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    scripts = {name: f'"{sys.executable}" -m pybroker {tool}'
               for name, tool in (("kafka-acls.sh", "acls"), ("kafka-topics.sh", "topics"))}
    if KAFKA_HOME:
        scripts["kafka-run-class.sh"] = f'"{Path(KAFKA_HOME) / "bin" / "kafka-run-class.sh"}"'
        # the suite compiles its Java clients against $KAFKA_PATH/libs
        (root / "libs").symlink_to(Path(KAFKA_HOME) / "libs")
    for name, command in scripts.items():
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        script.chmod(0o755)
    return root


def run_suite(number: str, bootstrap: str, tmp_path: Path) -> None:
    """Run suite test `number` (or `all`) against the brokers at `bootstrap`."""
    assert SUITE is not None
    suite = Path(SUITE)
    conf = tmp_path / "test.conf"
    # the suite's timeouts assume a JVM tool that answers in a second or two and an
    # idle machine: three times as long
    conf.write_text(f"bootstrap.servers={bootstrap}\ntest.timeout.multiplier=3\n")
    libs = [str(suite.parent / "src"), str(suite.parent / "src-cpp")]
    env = {**os.environ, "TEST_KAFKA_VERSION": "4.0.0", "BROKERS": bootstrap,
           "RDKAFKA_TEST_CONF": str(conf), "KAFKA_PATH": str(kafka_path(tmp_path / "kafka")),
           "LD_LIBRARY_PATH": ":".join([*libs, os.environ.get("LD_LIBRARY_PATH", "")])}
    # classic: unset, as the suite's default run (its consumers leave group.protocol alone)
    env.pop("TEST_CONSUMER_GROUP_PROTOCOL", None)
    if GROUP_PROTOCOL == "consumer":
        env["TEST_CONSUMER_GROUP_PROTOCOL"] = GROUP_PROTOCOL
    if number == "all":
        env.pop("TESTS", None)
    else:
        env["TESTS"] = number
    args = ["./test-runner", "-p1", *(["-Q"] if QUICK else [])]
    log = tmp_path / "test-runner.log"
    with log.open("w") as out:
        result = subprocess.run(args, cwd=suite, env=env, stdout=out, stderr=subprocess.STDOUT,
                                timeout=ALL_TIMEOUT_S if number == "all" else TIMEOUT_S)
    output = log.read_text(errors="replace")
    assert result.returncode == 0, f"librdkafka test {number} failed:\n{output[-6000:]}"
    assert "PASSED" in output or "SKIPPED" in output, output[-2000:]


@pytest.mark.parametrize("number", TESTS)
def test_librdkafka_suite(number: str, broker_factory: BrokerFactory, tmp_path: Path) -> None:
    b = broker_factory(SUITE_BROKER)
    run_suite(number, b.bootstrap, tmp_path)


@pytest.mark.parametrize("number", TESTS)
def test_librdkafka_suite_cluster(number: str, zookeeper: ZooKeeperServer,  # noqa: F811
                                  tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The same on three brokers, configured as the suite's own 3-broker cluster."""
    overrides = {
        **SUITE_BROKER,
        "default.replication.factor": "3",
        # Kafka's defaults, as the suite's brokers (the cluster harness shortens them
        # for its fault tests; a 6 s ZooKeeper session expired under load here)
        "group.initial.rebalance.delay.ms": "3000",
        "zookeeper.session.timeout.ms": "18000",
        "replica.lag.time.max.ms": "30000",
        "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
    cluster = Cluster(zookeeper, tmp_path / "cluster", overrides=overrides)
    for broker_id, broker in cluster.brokers.items():
        broker.overrides["broker.rack"] = f"RACK{broker_id}"
    request.node._pybroker_brokers = list(cluster.brokers.values())
    try:
        cluster.start()
        run_suite(number, cluster.bootstrap, tmp_path)
    finally:
        cluster.close()
