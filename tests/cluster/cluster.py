"""A pybroker cluster for fault tests: N broker processes on one ZooKeeper chroot,
each optionally reaching ZooKeeper through its own cuttable proxy, plus what the
tests need to look at it from outside:

- `zk`: the test's own kazoo session on the chroot (not proxied), reading the
  znodes brokers write (partition states, /controller, /brokers/ids) as an
  operator would with zkCli.sh;
- `describe()`: `pybroker topics --describe`, parsed (Kafka's line format);
- `read_partition()`: every record of a partition, read by a confluent-kafka
  consumer from its current leader up to the high watermark;
- `wait_for()`: every wait is a polled condition with a deadline.

Brokers are `tests.conftest.Broker` subprocesses (kill -9, SIGSTOP/SIGCONT, restart
on the same port and data dir; their log tails go into failure reports)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from tests.cluster.proxy import Proxy
from tests.cluster.zookeeper import ZooKeeperServer
from tests.conftest import START_TIMEOUT_S, Broker, free_port

T = TypeVar("T")

#: brokers in a test cluster, ids 1..N (Kafka's docs number them from 1 too)
SIZE = 3
#: short enough that a dead broker is noticed in seconds, long enough that a loaded
#: 2-core box keeps its sessions (the ZooKeeper tick is 250 ms)
SESSION_TIMEOUT_MS = 6000
#: followers lagging this long leave the ISR (Kafka's default is 30000)
LAG_TIME_MAX_MS = 10000
WAIT_S = 30.0
POLL_S = 0.1

#: `pybroker topics --describe` partition lines (Kafka's TopicCommand format)
DESCRIBE_LINE = re.compile(
    r"^\tTopic: (?P<topic>\S+)\tPartition: (?P<partition>\d+)\tLeader: (?P<leader>\S+)"
    r"\tReplicas: (?P<replicas>[\d,]*)\tIsr: (?P<isr>[\d,]*)$")


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode (over UTF-16 code units), as a signed 32-bit int: where
    Kafka places a group or a transactional id among its internal topic's partitions."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def wait_for(condition: Callable[[], T], timeout_s: float = WAIT_S, what: str = "condition",
             poll_s: float = POLL_S) -> T:
    """Poll `condition` until it returns something truthy (returned) or the deadline
    passes (AssertionError naming `what` and the last value). Exceptions from the
    condition count as 'not yet' until the deadline, then propagate."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        try:
            last = condition()
            if last:
                return last
        except Exception:
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what} "
                                 f"(last: {last!r})")
        time.sleep(poll_s)


class Cluster:
    def __init__(self, zookeeper: ZooKeeperServer, base: Path, *, size: int = SIZE,
                 proxied: bool = False, replication_proxied: bool = False,
                 metrics: bool = False, overrides: dict[str, object] | None = None) -> None:
        self.zookeeper = zookeeper
        self.chroot = f"/cluster-{uuid.uuid4().hex[:12]}"
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        #: broker -> the proxy its ZooKeeper connection goes through (`proxied`)
        self.proxies: dict[int, Proxy] = {}
        #: broker -> the proxy in front of its inter-broker listener (`replication_proxied`):
        #: other brokers (fetching followers, the controller) reach it only through this,
        #: clients and ZooKeeper directly
        self.replication_proxies: dict[int, Proxy] = {}
        self.metrics_ports: dict[int, int] = {}
        self.brokers: dict[int, Broker] = {}
        for broker_id in range(1, size + 1):
            port = free_port()
            connect = zookeeper.address
            if proxied:
                proxy = self.proxies[broker_id] = Proxy((zookeeper.host, zookeeper.port)).start()
                connect = proxy.address
            settings: dict[str, str] = {
                "broker.id": str(broker_id),
                "zookeeper.connect": connect + self.chroot,
                "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
                "group.initial.rebalance.delay.ms": "0",
                # fewer offsets partitions than Kafka's 50: each is 3 replica logs and 3
                # partition-state watches per broker, and tests start many clusters
                "offsets.topic.num.partitions": "5",
                # a whole cluster stops at once at teardown: brokers in controlled
                # shutdown find no one to hand leaderships to, and retry only briefly
                "controlled.shutdown.retry.backoff.ms": "300",
            }
            if replication_proxied:
                internal = free_port()
                proxy = Proxy(("127.0.0.1", internal)).start()
                self.replication_proxies[broker_id] = proxy
                settings.update({
                    "listeners": f"PLAINTEXT://127.0.0.1:{port},REPLICATION://127.0.0.1:"
                                 f"{internal}",
                    "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},REPLICATION://"
                                            f"{proxy.address}",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                                                      "REPLICATION:PLAINTEXT",
                    "inter.broker.listener.name": "REPLICATION",
                })
            if metrics:
                self.metrics_ports[broker_id] = free_port()
                settings["metrics.port"] = str(self.metrics_ports[broker_id])
            settings.update({k: str(v) for k, v in (overrides or {}).items()})
            self.brokers[broker_id] = Broker(
                host="127.0.0.1", port=port, data_dir=base / f"broker{broker_id}",
                log_path=base / f"broker{broker_id}.log", overrides=settings)
        self.zk = KazooClient(hosts=zookeeper.address + self.chroot, timeout=10.0)
        self._admin: AdminClient | None = None

    # --- lifecycle ----------------------------------------------------------------
    def start(self, ready_timeout_s: float = START_TIMEOUT_S) -> Cluster:
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            list(pool.map(lambda b: b.start(ready_timeout_s), self.brokers.values()))
        self.zk.start(timeout=WAIT_S)  # after the brokers made the chroot
        self.wait_registered(set(self.brokers))
        wait_for(self.controller, what="a controller")
        for broker_id in self.brokers:
            self.wait_knows_brokers(broker_id, set(self.brokers))
        return self

    def wait_knows_brokers(self, broker_id: int, ids: set[int],
                           timeout_s: float = WAIT_S) -> None:
        """Wait until the broker's metadata (its answer to Metadata) lists `ids`."""
        admin = AdminClient({"bootstrap.servers": self.brokers[broker_id].bootstrap})
        wait_for(lambda: set(admin.list_topics(timeout=5).brokers) == ids, timeout_s,
                 f"broker {broker_id} to know brokers {sorted(ids)}")

    def close(self) -> None:
        for broker in self.brokers.values():
            if broker.proc is not None and broker.proc.poll() is None:
                # a stopped process takes no SIGTERM until continued
                broker.proc.send_signal(signal.SIGCONT)
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            list(pool.map(lambda b: b.stop(), self.brokers.values()))
        for proxy in [*self.proxies.values(), *self.replication_proxies.values()]:
            proxy.close()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:
            pass

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def live(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.running]

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def restart(self, broker_id: int) -> None:
        """Start a stopped or killed broker again (same port, same data dir), at once:
        a killed broker's registration outlives it until its ZooKeeper session
        expires, and the restarted broker removes it (its data dir names that
        session) instead of waiting."""
        self.brokers[broker_id].start()

    def pause(self, broker_id: int) -> None:
        """SIGSTOP, and wait until the process is stopped (every thread of it)."""
        proc = self.brokers[broker_id].proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)
        tasks = Path(f"/proc/{proc.pid}/task")

        def stopped() -> bool:
            states = []
            for task in tasks.iterdir():
                try:
                    states.append((task / "stat").read_text().rpartition(")")[2].split()[0])
                except OSError:
                    continue  # a thread that just ended
            return bool(states) and all(s in "Tt" for s in states)
        wait_for(stopped, 5.0, f"broker {broker_id} to stop", poll_s=0.01)

    def resume(self, broker_id: int) -> None:
        proc = self.brokers[broker_id].proc
        assert proc is not None
        proc.send_signal(signal.SIGCONT)

    # --- what ZooKeeper holds ---------------------------------------------------------
    def registered(self) -> set[int]:
        return {int(c) for c in self.zk.get_children("/brokers/ids") if c.isdigit()}

    def wait_registered(self, ids: set[int], timeout_s: float = WAIT_S) -> None:
        wait_for(lambda: self.registered() == ids, timeout_s, f"brokers {sorted(ids)} registered")

    def controller(self) -> int | None:
        try:
            data, _ = self.zk.get("/controller")
        except NoNodeError:
            return None
        return int(json.loads(data)["brokerid"])

    def controller_epoch(self) -> int:
        data, _ = self.zk.get("/controller_epoch")
        return int(data)

    def state(self, topic: str, partition: int) -> dict[str, Any]:
        """The partition's state znode: leader, leader_epoch, isr, controller_epoch."""
        data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return dict(json.loads(data))

    def leader(self, topic: str, partition: int) -> int:
        return int(self.state(topic, partition)["leader"])

    def isr(self, topic: str, partition: int) -> list[int]:
        return sorted(self.state(topic, partition)["isr"])

    def wait_leader_not(self, topic: str, partition: int, old: int,
                        timeout_s: float = WAIT_S) -> int:
        """Wait until the state names a live leader other than `old`; return it."""
        def moved() -> int | None:
            leader = self.leader(topic, partition)
            return leader if leader not in (old, -1) else None
        return wait_for(moved, timeout_s, f"{topic}-{partition} to leave broker {old}")

    def watch_isr(self, topic: str, partitions: int) -> dict[int, list[list[int]]]:
        """Record every ISR each partition's state znode goes through from now on
        (ZooKeeper data watches); the lists grow as the states change."""
        history: dict[int, list[list[int]]] = {p: [] for p in range(partitions)}
        def recorder(isrs: list[list[int]]) -> Callable[[bytes | None, Any], None]:
            def changed(data: bytes | None, stat: Any) -> None:  # kazoo counts the args
                if data:
                    isrs.append(sorted(json.loads(data)["isr"]))
            return changed
        for p in range(partitions):
            self.zk.DataWatch(f"/brokers/topics/{topic}/partitions/{p}/state",
                              recorder(history[p]))
        return history

    def wait_full_isr(self, topic: str, partitions: int, timeout_s: float = WAIT_S) -> None:
        everyone = sorted(self.brokers)
        wait_for(lambda: all(self.isr(topic, p) == everyone for p in range(partitions)),
                 timeout_s, f"every partition of {topic} to have ISR {everyone}")

    # --- what clients see -------------------------------------------------------------
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def create_topic(self, name: str, partitions: int, replication: int = SIZE,
                     configs: dict[str, str] | None = None) -> None:
        """Create the topic and wait until every partition has a leader and a full ISR
        and every live broker's metadata knows it."""
        futures = self.admin().create_topics([NewTopic(
            name, num_partitions=partitions, replication_factor=replication,
            config=configs or {})], request_timeout=WAIT_S)
        futures[name].result(WAIT_S)
        wait_for(lambda: all(len(self.isr(name, p)) == replication for p in range(partitions)),
                 what=f"{name}'s partitions to have full ISRs")
        for broker_id in self.live():
            bootstrap = self.brokers[broker_id].bootstrap
            wait_for(lambda b=bootstrap: self._metadata_has(b, name, partitions),
                     what=f"broker {broker_id} to know {name}")

    @staticmethod
    def _metadata_has(bootstrap: str, topic: str, partitions: int) -> bool:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        meta = admin.list_topics(topic, timeout=5)
        found = meta.topics.get(topic)
        return (found is not None and found.error is None and len(found.partitions) == partitions
                and all(p.leader >= 0 for p in found.partitions.values()))

    def describe(self, topic: str) -> dict[int, dict[str, Any]]:
        """`pybroker topics --describe --topic T`, parsed: partition -> leader, replicas,
        isr (sorted as printed). Every partition line must have Kafka's format."""
        live = [self.brokers[i].bootstrap for i in self.live()]
        out = subprocess.run(
            [sys.executable, "-m", "pybroker", "topics", "--bootstrap-server", ",".join(live),
             "--describe", "--topic", topic],
            capture_output=True, text=True, timeout=60, check=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}).stdout
        parsed: dict[int, dict[str, Any]] = {}
        for line in out.splitlines():
            if not line.startswith("\tTopic:"):
                continue
            match = DESCRIBE_LINE.match(line)
            assert match, f"not Kafka's describe format: {line!r}"
            parsed[int(match["partition"])] = {
                "leader": -1 if match["leader"] == "none" else int(match["leader"]),
                "replicas": [int(x) for x in match["replicas"].split(",") if x],
                "isr": [int(x) for x in match["isr"].split(",") if x],
                "line": line,
            }
        return parsed

    def read_partition(self, topic: str, partition: int, timeout_s: float = WAIT_S
                       ) -> list[tuple[int, bytes]]:
        """Every record (offset, value) of the partition from its leader, up to the
        high watermark at the time of the call."""
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "enable.partition.eof": True, "fetch.wait.max.ms": 100,
        })
        try:
            tp = TopicPartition(topic, partition)
            low, high = wait_for(lambda: consumer.get_watermark_offsets(tp, timeout=5),
                                 timeout_s, f"watermarks of {topic}-{partition}")
            records: list[tuple[int, bytes]] = []
            if high <= low:
                return records
            consumer.assign([TopicPartition(topic, partition, low)])
            deadline = time.monotonic() + timeout_s
            next_offset = low
            while next_offset < high:
                assert time.monotonic() < deadline, (
                    f"read {topic}-{partition} only to {next_offset} of {high} in {timeout_s}s")
                for message in consumer.consume(500, timeout=1.0):
                    if message.error() is not None:
                        if message.error().code() == -191:  # _PARTITION_EOF
                            continue
                        raise KafkaException(message.error())
                    records.append((message.offset(), message.value() or b""))
                    next_offset = message.offset() + 1
            return [r for r in records if r[0] < high]
        finally:
            consumer.close()

    def log_bytes(self, broker_id: int, topic: str, partition: int) -> bytes:
        """The partition's segments on one broker, concatenated in offset order."""
        directory = self.brokers[broker_id].data_dir / f"{topic}-{partition}"
        return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))

    def metrics(self, broker_id: int) -> dict[str, float]:
        """The broker's Prometheus exposition: sample name (with labels) -> value."""
        from urllib.request import urlopen

        url = f"http://127.0.0.1:{self.metrics_ports[broker_id]}/metrics"
        with urlopen(url, timeout=5) as response:  # noqa: S310 - loopback test endpoint
            text = response.read().decode()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples


def cluster_fixture(zookeeper: ZooKeeperServer, tmp_path: Path, request: Any,
                    **kwargs: Any) -> Iterator[Cluster]:
    """Start a cluster for one test; its brokers' log tails go into a failure report."""
    cluster = Cluster(zookeeper, tmp_path, **kwargs)
    request.node._pybroker_brokers = list(cluster.brokers.values())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
