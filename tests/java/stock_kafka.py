"""A stock Apache Kafka cluster in KRaft mode, started from $KAFKA_HOME for a test: every
node is a combined broker+controller (process.roles=broker,controller) on free loopback
ports with its own data dir, formatted with `kafka-storage.sh format` under one random
cluster id and run with `kafka-server-start.sh`.

`start_kafka_cluster()` raises KafkaUnavailable (the tests' fixture turns it into a skip
with the reason) when the distribution cannot run a broker: no Scala core jar, a failing
format, or a broker that exits before it serves. A broker that is still running but not
ready at the deadline is an AssertionError, not a skip: that is a real problem, not a
missing piece. bench/kafka_peer.py uses the same code to start a peer for the benchmarks."""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tests.conftest import free_port
from tests.java.kafka import App, kafka_home, script, tool_env, write_properties

START_TIMEOUT_S = 180.0
FORMAT_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
# The broker gets Kafka's own JVM options (kafka-run-class.sh fills in an empty
# KAFKA_JVM_PERFORMANCE_OPTS), not the C1-only JIT the short-lived tools get: a broker runs
# long enough to need C2.
TEST_HEAP = "-Xmx512m -Xms256m"  # kafka-server-start.sh's own default is -Xmx1G -Xms1G


class KafkaUnavailable(Exception):
    """This $KAFKA_HOME cannot run a stock broker (the message says why)."""


def random_cluster_id() -> str:
    """What `kafka-storage.sh random-uuid` prints: 16 random bytes, URL-safe base64 without
    padding; never starting with '-', which the command line would take for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def core_jar_missing() -> str | None:
    """Why $KAFKA_HOME cannot run a broker at all, or None."""
    if not list((kafka_home() / "libs").glob("kafka_2.*.jar")):
        return (f"{kafka_home()} has no Scala core jar (libs/kafka_2.*.jar): "
                "kafka-server-start.sh cannot run a stock broker")
    return None


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    data_dir: Path
    config_path: Path
    app: App


@dataclass
class KafkaCluster:
    """A running stock Kafka KRaft cluster; `bootstrap` lists every node."""

    workdir: Path
    cluster_id: str
    nodes: list[KafkaNode] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def pids(self) -> list[int]:
        return [n.app.proc.pid for n in self.nodes if n.app.proc is not None]

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(f"--- stock kafka node {n.node_id} ---\n{n.app.log_tail(lines)}"
                         for n in self.nodes)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (a controlled shutdown), kill -9 after `timeout`."""
        for n in self.nodes:
            n.app.stop(timeout)


def node_properties(node_id: int, port: int, controller_port: int, voters: str,
                    data_dir: Path, replication: int) -> dict[str, object]:
    return {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": data_dir,
        "num.network.threads": 2,
        "num.io.threads": 4,
        "offsets.topic.replication.factor": replication,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min(2, replication),
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": min(2, replication),
        "group.initial.rebalance.delay.ms": 0,
    }


def _brokers_up(bootstrap: str) -> int:
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        return len(admin.list_topics(timeout=2).brokers)
    except Exception:  # not listening yet: keep polling until the deadline
        return 0


def start_kafka_cluster(workdir: Path, nodes: int = 1,
                        overrides: dict[str, object] | None = None,
                        timeout: float = START_TIMEOUT_S,
                        heap: str = TEST_HEAP) -> KafkaCluster:
    """Format and start `nodes` combined KRaft nodes; return once every broker is
    registered and unfenced (the metadata lists all of them)."""
    reason = core_jar_missing()
    if reason:
        raise KafkaUnavailable(reason)
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = KafkaCluster(workdir, random_cluster_id())
    ports = [(free_port(), free_port()) for _ in range(nodes)]
    voters = ",".join(f"{i + 1}@127.0.0.1:{cport}" for i, (_, cport) in enumerate(ports))
    replication = min(3, nodes)
    for i, (port, cport) in enumerate(ports):
        node_dir = workdir / f"kafka{i + 1}"
        node_dir.mkdir(exist_ok=True)
        props = node_properties(i + 1, port, cport, voters, node_dir / "data", replication)
        props.update(overrides or {})
        config = write_properties(node_dir / "server.properties", props)
        fmt = subprocess.run(
            [script("kafka-storage.sh"), "format", "-t", cluster.cluster_id, "-c", str(config)],
            capture_output=True, text=True, timeout=FORMAT_TIMEOUT_S, stdin=subprocess.DEVNULL,
            env=tool_env(node_dir))
        if fmt.returncode != 0:
            cluster.stop()
            last = (fmt.stdout + fmt.stderr).strip().splitlines()[-3:]
            raise KafkaUnavailable(
                f"kafka-storage.sh format failed ({fmt.returncode}): {' | '.join(last)}")
        app = App([script("kafka-server-start.sh"), str(config)], node_dir / "server.out",
                  env={"LOG_DIR": str(node_dir / "logs"), "KAFKA_HEAP_OPTS": heap,
                       "KAFKA_JVM_PERFORMANCE_OPTS": ""})
        cluster.nodes.append(KafkaNode(i + 1, port, cport, node_dir / "data", config, app))
        app.start()
    deadline = time.monotonic() + timeout
    while _brokers_up(cluster.bootstrap) < nodes:
        dead = [n for n in cluster.nodes if not n.app.running]
        if dead:
            tail = dead[0].app.log_tail(15)
            cluster.stop()
            raise KafkaUnavailable(f"stock Kafka broker {dead[0].node_id} exited before it served "
                        f"(exit {dead[0].app.proc.returncode if dead[0].app.proc else '?'}):"
                        f"\n{tail}")
        if time.monotonic() > deadline:
            tail = cluster.log_tail()
            cluster.stop()
            raise AssertionError(f"stock Kafka ({nodes} node(s)) not ready after {timeout}s:"
                                 f"\n{tail}")
        time.sleep(1.0)
    return cluster
