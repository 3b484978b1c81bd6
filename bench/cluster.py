#!/usr/bin/env python3
"""Cluster mode (issue 12): what replication costs and how long a failover takes.

Starts a ZooKeeper server (Debian's package, as the tests do) and three pybroker
processes on loopback (zookeeper.connect=...:PORT/chroot), then measures:

- **throughput**: one confluent-kafka producer (linger.ms=5, batch.size=1000000,
  1 KiB records round-robin over the partitions) sends `--records` records to a
  fresh topic; the clock stops when flush() returns, every record acknowledged.
  Cases: RF=3 with acks=all (min.insync.replicas=2), RF=3 with acks=1, and RF=1
  with acks=1 (no replication at all). Cases are interleaved, `--repeat` times;
  each topic is deleted after its run. Also reported: CPU seconds of the three
  broker processes per GB produced (and the system share of it: the kernel's copies,
  TCP and page cache), this process's CPU per GB (the producer and its librdkafka
  threads: the client side) and the load average at the end of the case.
- **latency**: records sent at `--rate`/s for `--seconds` to a one-partition RF=3
  topic with acks=all (confluent-kafka, linger.ms=0, batch.size=1000000,
  max.in.flight.requests.per.connection `--max-in-flight`, default 5; the consumer
  with librdkafka's defaults, fetch.wait.max.ms=500 and fetch.min.bytes=1, woken by the
  high watermark), each carrying its send time; a consumer (which sees a
  record only once the high watermark passed it, i.e. once the ISR has it) reads
  them back: end-to-end p50/p99/p99.9/max, and the producer's acknowledgement
  latency (send -> delivery report).
- **failover**: a producer sends acks=all records round three partitions (RF=3,
  min.insync.replicas=2) at `--failover-rate`/s; each round kills -9 the leader of
  one (not the controller, or with `--kill-controller` the controller leading it);
  measured from the kill: the new leader (in ZooKeeper; for Kafka in the metadata),
  the killed broker out of every ISR, the first record of that partition
  acknowledged; then the dead broker is restarted and waited for in every ISR.
  Failed sends and the longest pauses between acknowledgements are counted.
  `--producer java` sends with Kafka's Java client and its defaults (retries,
  delivery.timeout.ms, idempotence) through kafka-verifiable-producer.sh.
- **verifiable** (not in the default set): the issue-25 fault run: the producer sends
  `--verifiable-messages` records through five kill -9s (leaders and the controller in
  turn, each restarted at once) and a rolling restart; failed sends and pauses counted.

Every wait is bounded; everything runs on loopback and is torn down at exit.

With ``--peer HOST:PORT[,...]`` the throughput and latency parts run against an already
running cluster of three brokers instead (a stock Kafka KRaft cluster:
``bench/kafka_peer.py --nodes 3 -- python bench/cluster.py --peer {bootstrap}
--peer-pids {pids} ...`` starts one from $KAFKA_HOME, runs this, and stops it);
``--peer-pids`` lets the CPU per GB be measured. Failover kills and restarts brokers, so
it needs to own them: ``--stock-kafka`` runs every part against a 3-node stock Kafka KRaft
cluster (combined broker+controller nodes, Kafka's defaults, the same code as
bench/kafka_peer.py) that the bench starts from $KAFKA_HOME itself. There "the controller"
is the active KRaft controller (the leader in the nodes' quorum-state files) and "the new
leader" is the first leader other than the killed one in the metadata the live brokers
answer with.

Examples:
    python bench/cluster.py                                  # all, default sizes
    python bench/cluster.py --only throughput --records 300000 --repeat 2
    python bench/cluster.py --only failover --rounds 5 --json out.json
    python bench/kafka_peer.py --nodes 3 -- python bench/cluster.py --only throughput \
        --only latency --peer {bootstrap} --peer-pids {pids}
    KAFKA_HOME=/opt/kafka python bench/cluster.py --only failover --rounds 10 --stock-kafka \
        --producer java
    KAFKA_HOME=/opt/kafka python bench/cluster.py --only verifiable --producer java \
        --override zookeeper.session.timeout.ms=18000 --override replica.lag.time.max.ms=30000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

try:
    import psutil
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicCollection, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.cluster.cluster import SESSION_TIMEOUT_MS, Cluster, wait_for
    from tests.cluster.zookeeper import ZooKeeperServer, unavailable_reason
    from tests.java.stock_kafka import KafkaCluster, KafkaUnavailable, start_kafka_cluster
    from throughput import machine_info
except ImportError as exc:  # pragma: no cover - guidance only
    sys.exit(f"missing dependency ({exc}); run: pip install -e '.[test]'")

KiB = 1024
STAMP = struct.Struct(">q")
WAIT_S = 60.0
#: librdkafka's and the Java client's default request.timeout.ms: a produce request's
#: timeout_ms
REQUEST_TIMEOUT_S = 30.0


def percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


class PeerCluster:
    """An already running cluster (e.g. stock Kafka): what throughput() and latency()
    use of a Cluster, through the Kafka protocol only."""

    def __init__(self, bootstrap: str, pids: list[int]) -> None:
        self.bootstrap = bootstrap
        self.pids = pids
        self._admin: AdminClient | None = None

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        return self._admin

    def create_topic(self, name: str, partitions: int, replication: int,
                     configs: dict[str, str] | None = None) -> None:
        """Create the topic and wait until every partition has a leader and a full ISR."""
        self.admin().create_topics([NewTopic(
            name, num_partitions=partitions, replication_factor=replication,
            config=configs or {})], request_timeout=WAIT_S)[name].result(WAIT_S)

        def settled() -> bool:
            try:
                found = self.admin().describe_topics(TopicCollection([name]))[name].result(10)
            except Exception:  # not in the metadata yet: keep polling
                return False
            return (len(found.partitions) == partitions
                    and all(p.leader is not None and len(p.isr) == replication
                            for p in found.partitions))
        wait_for(settled, WAIT_S, f"{name}'s partitions to have full ISRs")


class StockKafkaCluster(PeerCluster):
    """A 3-node stock Kafka KRaft cluster the bench started itself: what failover() uses
    of a Cluster (controller, leaders, ISRs, kill -9, restart), read through the Kafka
    protocol and the nodes' own files, so the same scenario runs on both sides."""

    def __init__(self, kafka: KafkaCluster) -> None:
        super().__init__(kafka.bootstrap, kafka.pids)
        self.kafka = kafka
        self.nodes = {n.node_id: n for n in kafka.nodes}

    @property
    def brokers(self) -> dict[int, Any]:
        return self.nodes

    def live(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.app.running]

    def _live_admin(self) -> AdminClient:
        """An admin client bootstrapped from the live nodes only (a fresh one: the shared
        client may sit in its reconnect backoff to the killed node)."""
        live = ",".join(f"127.0.0.1:{self.nodes[i].port}" for i in self.live())
        return AdminClient({"bootstrap.servers": live, "log_level": 0})

    def controller(self) -> int | None:
        """The active KRaft controller: the leader of the highest epoch any live node's
        quorum-state file records (a node rewrites it when it learns of a new leader)."""
        best: tuple[int, int] | None = None
        for i in self.live():
            path = self.nodes[i].data_dir / "__cluster_metadata-0" / "quorum-state"
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being rewritten: the other nodes still say
            leader, epoch = int(state.get("leaderId", -1)), int(state.get("leaderEpoch", -1))
            if leader >= 0 and (best is None or epoch > best[1]):
                best = (leader, epoch)
        return best[0] if best else None

    def _partitions(self, topic: str, admin: AdminClient | None = None) -> dict[int, Any]:
        meta = (admin or self._live_admin()).list_topics(topic, timeout=5)
        found = meta.topics.get(topic)
        if found is None or found.error is not None:
            return {}
        return dict(found.partitions)

    def leader(self, topic: str, partition: int) -> int:
        return int(self._partitions(topic)[partition].leader)

    def isr(self, topic: str, partition: int) -> list[int]:
        """The ISR the live brokers' metadata gives (unknown: the old one, polled again)."""
        try:
            return sorted(self._partitions(topic)[partition].isrs)
        except Exception:  # no answer this time: say nothing changed
            return sorted(self.nodes)

    def wait_leader_not(self, topic: str, partition: int, old: int,
                        timeout_s: float = WAIT_S) -> int:
        admin = self._live_admin()

        def moved() -> int | None:
            try:
                leader = int(self._partitions(topic, admin)[partition].leader)
            except Exception:  # no answer this time: poll again
                return None
            return leader if leader not in (old, -1) else None
        return wait_for(moved, timeout_s, f"{topic}-{partition} to leave node {old}",
                        poll_s=0.05)

    def wait_full_isr(self, topic: str, partitions: int, timeout_s: float = WAIT_S) -> None:
        everyone = sorted(self.nodes)

        def full() -> bool:
            try:
                found = self._partitions(topic)
            except Exception:  # a node still starting: poll again
                return False
            return len(found) == partitions and all(
                sorted(p.isrs) == everyone for p in found.values())
        wait_for(full, timeout_s, f"every partition of {topic} to have ISR {everyone}")

    def kill(self, node_id: int) -> None:
        self.nodes[node_id].app.kill()

    def restart(self, node_id: int, timeout_s: float = 120.0) -> None:
        """Start the killed node again (same config and data dir); return once it
        answers Metadata listing every node (it is registered and unfenced)."""
        node = self.nodes[node_id]
        node.app.start()
        self.pids = self.kafka.pids
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.port}", "log_level": 0})

        def serving() -> bool:
            try:
                return len(admin.list_topics(timeout=2).brokers) == len(self.nodes)
            except Exception:  # not listening yet
                return False
        wait_for(serving, timeout_s, f"Kafka node {node_id} to serve", poll_s=0.1)

    def close(self) -> None:
        self.kafka.stop()


def broker_pids(cluster: Cluster | PeerCluster) -> list[int]:
    if isinstance(cluster, PeerCluster):
        return cluster.pids
    return [b.proc.pid for b in cluster.brokers.values()
            if b.proc is not None and b.proc.poll() is None]


def broker_cpu_split(cluster: Cluster | PeerCluster) -> tuple[float, float]:
    """The brokers' (user, system) CPU seconds so far."""
    user = system = 0.0
    for pid in broker_pids(cluster):
        times = psutil.Process(pid).cpu_times()
        user += times.user
        system += times.system
    return user, system


def own_cpu_s() -> float:
    """This process's CPU seconds so far: the bench's producer (its Python loop and
    librdkafka's threads) and the high-watermark polls, the client side of a case."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- throughput ---------------------------------------------------------------------------
def produce_all(bootstrap: str, topic: str, partitions: int, records: int, acks: str,
                timeout_s: float) -> float:
    """Send `records` 1 KiB records; seconds until every one is acknowledged."""
    errors: list[str] = []

    def on_error(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1_000_000, "delivery.report.only.error": True,
                         "message.timeout.ms": int(timeout_s * 1000), "log_level": 3})
    producer.list_topics(topic, timeout=10)
    value = b"v" * KiB
    deadline = time.monotonic() + timeout_s
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions, on_delivery=on_error)
                break
            except BufferError:
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"produce timed out after {i} records") from None
        if i & 0x3FFF == 0:
            producer.poll(0)
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    elapsed = time.perf_counter() - start
    if errors or remaining:
        raise RuntimeError(f"{remaining} undelivered, errors {errors[:3]}")
    return elapsed


def wait_replicated(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """Wait until the high watermarks of the (fresh) topic add up to `records`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hw-{topic}",
                         "log_level": 0})
    try:
        def total() -> int:
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                       for p in range(partitions))
        wait_for(lambda: total() >= records, WAIT_S, f"{topic} replicated", poll_s=0.01)
    finally:
        consumer.close()


def throughput(cluster: Cluster | PeerCluster, args: argparse.Namespace) -> list[dict[str, Any]]:
    cases = [("RF=3 acks=all", 3, "all"), ("RF=3 acks=1", 3, "1"), ("RF=1 acks=1", 1, "1")]
    rows = []
    for repetition in range(args.repeat):
        for label, replication, acks in cases:
            topic = f"tp-{uuid.uuid4().hex[:8]}"
            configs = {"min.insync.replicas": "2"} if replication == 3 else {}
            cluster.create_topic(topic, args.partitions, replication, configs)
            user0, system0 = broker_cpu_split(cluster)
            client0 = own_cpu_s()
            start = time.perf_counter()
            seconds = produce_all(cluster.bootstrap, topic, args.partitions, args.records, acks,
                                  args.timeout)
            # acks=1 is answered before the followers have the records: the clock of the
            # whole job (and the CPU) runs on until the high watermark, the smallest log
            # end over the ISR, reaches the end of every partition
            wait_replicated(cluster.bootstrap, topic, args.partitions, args.records)
            replicated = time.perf_counter() - start
            user1, system1 = broker_cpu_split(cluster)
            client = own_cpu_s() - client0
            cpu = user1 - user0 + system1 - system0
            mb = args.records * KiB / 1e6
            row = {"case": label, "repetition": repetition, "records": args.records,
                   "partitions": args.partitions, "seconds": round(seconds, 3),
                   "records_per_s": round(args.records / seconds),
                   "mb_per_s": round(mb / seconds, 1),
                   "replicated_seconds": round(replicated, 3),
                   "replicated_mb_per_s": round(mb / replicated, 1),
                   "broker_cpu_s_per_gb": round(cpu / (mb / 1000), 2),
                   # the kernel's share (copies, TCP, the page cache) against the
                   # processes' own code, and the client's CPU beside the brokers' (issue 26)
                   "broker_system_cpu_s_per_gb": round((system1 - system0) / (mb / 1000), 2),
                   "client_cpu_s_per_gb": round(client / (mb / 1000), 2),
                   "load_average": round(os.getloadavg()[0], 1)}
            print(f"throughput {label}: {row['mb_per_s']} MB/s acknowledged, "
                  f"{row['replicated_mb_per_s']} MB/s on every replica, "
                  f"broker CPU {row['broker_cpu_s_per_gb']} s/GB "
                  f"(system {row['broker_system_cpu_s_per_gb']}), "
                  f"client CPU {row['client_cpu_s_per_gb']} s/GB, "
                  f"load {row['load_average']}", flush=True)
            rows.append(row)
            cluster.admin().delete_topics([topic], request_timeout=30)[topic].result(30)
    return rows


# --- latency ------------------------------------------------------------------------------
def latency(cluster: Cluster | PeerCluster, args: argparse.Namespace) -> dict[str, Any]:
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    total = int(args.rate * args.seconds)
    e2e: list[float] = []
    acked: list[float] = []
    ready = threading.Event()

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": topic,
                             "enable.auto.commit": False, "log_level": 0})
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        consumer.poll(0.5)
        ready.set()
        deadline = time.monotonic() + args.seconds + WAIT_S
        while len(e2e) < total and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                sent = STAMP.unpack_from(message.value())[0]
                if sent:  # 0: a warm-up record
                    e2e.append((time.monotonic_ns() - sent) / 1e6)
        consumer.close()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    ready.wait(WAIT_S)
    # librdkafka's statistics count the Produce requests sent to each broker: the leader's
    # CPU per produce request (each also brings the followers' and the consumer's fetches
    # that its records wake) depends less on how the records happened to be batched than
    # its CPU per record does (a starved leader gets fewer, larger requests)
    stats: dict[str, Any] = {}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 0, "batch.size": 1_000_000, "log_level": 0,
                         "max.in.flight.requests.per.connection": args.max_in_flight,
                         "statistics.interval.ms": 100,
                         "stats_cb": lambda raw: stats.update(json.loads(raw))})
    padding = b"x" * (KiB - STAMP.size)

    def report(err: Any, message: Any) -> None:
        sent = STAMP.unpack_from(message.value())[0]
        if err is None and sent:
            acked.append((time.monotonic_ns() - sent) / 1e6)

    # warm up: a new partition's followers start fetching it only after their first
    # fetch of it (a follower told of it before its leader backs off
    # replica.fetch.backoff.ms), so the first acknowledgement can take a second
    warm: list[float] = []
    warm_start = time.monotonic()
    while not warm:
        producer.produce(topic, STAMP.pack(0) + padding,
                         on_delivery=lambda err, _m: warm.append(time.monotonic()))
        producer.poll(0.05)
        if time.monotonic() - warm_start > WAIT_S:
            raise RuntimeError("no acknowledgement during the warm-up")
    producer.flush(WAIT_S)
    first_ack_s = warm[0] - warm_start
    leader_pid = leader_process(cluster, topic)
    leader_id = cluster.leader(topic, 0) if isinstance(cluster, Cluster) else None
    loop_before = loop_thread_sched(leader_pid)
    produces_before = produce_requests(stats, leader_id)
    cpu_before = process_cpu_s(cluster, leader_pid)
    start = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - start) * args.rate) + 1)
        while sent < due:
            producer.produce(topic, STAMP.pack(time.monotonic_ns()) + padding, on_delivery=report)
            sent += 1
        producer.poll(0)
        pause = start + sent / args.rate - time.monotonic()
        if pause >= 0.001:
            producer.poll(pause)  # serves delivery reports as they come
        elif pause > 0:
            # poll() takes whole milliseconds: the sub-millisecond pauses of 5,000 records/s
            # were poll(0) in a loop, and the client spun a core of this 2-core machine
            # and held the GIL its consumer thread needs to see a record (issue 26)
            time.sleep(pause)
    producer.flush(WAIT_S)
    loop_wall = time.monotonic() - start
    loop_after = loop_thread_sched(leader_pid)
    cpu_after = process_cpu_s(cluster, leader_pid)
    producer.poll(0.2)  # the statistics of the last 100 ms, as before the load
    produces = produce_requests(stats, leader_id) - produces_before
    thread.join(args.seconds + WAIT_S)

    def summary(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {"records": len(ordered), "p50_ms": round(percentile(ordered, 50), 2),
                "p99_ms": round(percentile(ordered, 99), 2),
                "p99.9_ms": round(percentile(ordered, 99.9), 2),
                "max_ms": round(ordered[-1], 2) if ordered else float("nan")}

    result = {"rate": args.rate, "seconds": args.seconds, "sent": total,
              "max_in_flight": args.max_in_flight,
              "first_ack_of_new_topic_s": round(first_ack_s, 2),
              "end_to_end": summary(e2e), "produce_ack": summary(acked)}
    if loop_before is not None and loop_after is not None:
        # the leader's event loop thread over the load: on CPU, waiting for a CPU while
        # runnable (the other brokers and the clients on the same cores), and how often
        # it was preempted (issue 26)
        result["leader_loop"] = {
            "on_cpu": round((loop_after[0] - loop_before[0]) / 1e9 / loop_wall, 3),
            "runqueue_wait": round((loop_after[1] - loop_before[1]) / 1e9 / loop_wall, 3),
            "preempted_per_s": round((loop_after[2] - loop_before[2]) / loop_wall),
            # the loop thread's CPU per record: less sensitive to the machine's load than
            # the latency (a starved loop waits longer, it does not work more)
            "cpu_us_per_record": round((loop_after[0] - loop_before[0]) / 1e3 / total, 1),
            "produce_requests": produces,
            "cpu_us_per_produce_request": round(
                (loop_after[0] - loop_before[0]) / 1e3 / produces, 1) if produces > 0 else None}
    # the cores each process used over the load: the 2-core machine is saturated when
    # their sum nears 2, and then the tail is a queue for a core, not a wait in the path
    # (issue 26)
    result["cores_used"] = {name: round((cpu_after[name] - cpu_before.get(name, 0.0))
                                        / loop_wall, 2) for name in cpu_after}
    result["cores_used"]["total"] = round(sum(result["cores_used"].values()), 2)
    print(f"latency at {args.rate}/s (RF=3, acks=all, max.in.flight {args.max_in_flight}): "
          f"end-to-end {result['end_to_end']}; "
          f"acknowledgement {result['produce_ack']}; first acknowledgement on the new topic "
          f"after {result['first_ack_of_new_topic_s']}s; the leader's loop thread "
          f"{result.get('leader_loop', 'not measured')}; cores used {result['cores_used']}",
          flush=True)
    return result


def leader_process(cluster: Cluster | PeerCluster, topic: str) -> int | None:
    """The pid of the partition's leader, for a cluster this bench started (None else)."""
    if not isinstance(cluster, Cluster):
        return None
    proc = cluster.brokers[cluster.leader(topic, 0)].proc
    return proc.pid if proc is not None else None


def process_cpu_s(cluster: Cluster | PeerCluster, leader_pid: int | None) -> dict[str, float]:
    """CPU seconds so far of the partition's leader, its followers (the other brokers,
    together) and this process (the bench's producer and consumer, librdkafka's threads
    included); brokers this bench does not own (a peer) count as "brokers"."""
    seconds = {"bench client": own_cpu_s()}
    for pid in broker_pids(cluster):
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        name = "leader" if pid == leader_pid else \
            "followers" if leader_pid is not None else "brokers"
        seconds[name] = seconds.get(name, 0.0) + times.user + times.system
    return seconds


def produce_requests(stats: dict[str, Any], node_id: int | None) -> int:
    """Produce requests the producer has sent broker `node_id` so far (its latest
    librdkafka statistics; 0 when unknown)."""
    for broker in stats.get("brokers", {}).values():
        if broker.get("nodeid") == node_id:
            return int(broker.get("req", {}).get("Produce", 0))
    return 0


def loop_thread_sched(pid: int | None) -> tuple[int, int, int] | None:
    """A broker's main (event loop) thread: ns on CPU, ns runnable but waiting for a CPU
    (/proc/PID/task/PID/schedstat), and its involuntary context switches so far."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            on_cpu, waited, _ = (int(x) for x in f.read().split())
        with open(f"/proc/{pid}/task/{pid}/status") as f:
            preempted = next(int(line.split()[1]) for line in f
                             if line.startswith("nonvoluntary_ctxt_switches"))
    except (OSError, ValueError, StopIteration):
        return None
    return on_cpu, waited, preempted


# --- failover ---------------------------------------------------------------------------
class FailoverProducer:
    """Sends acks=all records round the partitions at a fixed rate and records, per
    partition, the wall-clock time of every acknowledgement and every failed send.
    Two kinds: librdkafka (confluent-kafka, `message.timeout.ms` set to the Java
    client's `delivery.timeout.ms`, its default retries) and Kafka's own Java client
    through kafka-verifiable-producer.sh with the Java client's defaults (retries and
    idempotence on: the tool's own retries=0 is overridden with Kafka's default)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float,
                 kind: str, extra: dict[str, str], workdir: Path,
                 max_messages: int = -1) -> None:
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.kind, self.extra, self.workdir, self.max_messages = kind, extra, workdir, max_messages
        self.acks: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.failures: list[str] = []
        # (sent at, send -> acknowledgement): librdkafka only, the Java tool does not say
        # when it sent
        self.latencies: list[tuple[float, float]] = []
        self.sent = 0
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> FailoverProducer:
        target = self._run_java if self.kind == "java" else self._run_librdkafka
        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the tool closes its producer: flushes
        if self.thread is not None:
            self.thread.join(WAIT_S * 2)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def done(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()

    def acked(self) -> int:
        with self.lock:
            return sum(len(a) for a in self.acks.values())

    def first_ack_after(self, partition: int, since: float) -> float | None:
        with self.lock:
            return next((a for a in self.acks[partition] if a > since), None)

    def _record(self, partition: int, at: float, error: str | None,
                sent: float | None = None) -> None:
        with self.lock:
            if error is None:
                self.acks[partition].append(at)
                if sent is not None:
                    self.latencies.append((sent, at - sent))
            else:
                self.failures.append(error)

    def _run_librdkafka(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "linger.ms": 0, "message.timeout.ms": 120000, "log_level": 0,
                             **self.extra})

        def reporter(partition: int) -> Any:
            sent = time.time()

            def report(err: Any, _message: Any) -> None:
                now = time.time()
                self._record(partition, now, None if err is None else str(err), sent)
            return report

        interval = 1.0 / self.rate
        while not self.stop_event.is_set() and self.sent != self.max_messages:
            partition = self.sent % self.partitions
            self.sent += 1
            producer.produce(self.topic, b"f" * KiB, partition=partition,
                             on_delivery=reporter(partition))
            producer.poll(interval)
        producer.flush(WAIT_S * 2)

    def _run_java(self) -> None:
        home = os.environ.get("KAFKA_HOME", "")
        if not home:
            raise RuntimeError("--producer java needs KAFKA_HOME")
        config = self.workdir / f"producer-{self.topic}.properties"
        # Kafka's defaults (the tool sets retries=0 unless its config says otherwise)
        settings = {"retries": "2147483647", **self.extra}
        config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        # keys 0..29 hash (murmur2) onto all three partitions, so each gets traffic
        cmd = [str(Path(home) / "bin" / "kafka-verifiable-producer.sh"), "--topic", self.topic,
               "--bootstrap-server", self.bootstrap, "--acks", "-1",
               "--throughput", str(int(self.rate)), "--max-messages", str(self.max_messages),
               "--repeating-keys", "30", "--producer.config", str(config)]
        env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m",
               "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseSerialGC -Djava.awt.headless=true",
               "LOG_DIR": str(self.workdir)}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=open(self.workdir / "producer.err", "ab"),  # noqa: SIM115
                                     stdin=subprocess.DEVNULL, env=env)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            text = line.decode(errors="replace").strip()
            if not text.startswith("{"):
                continue
            try:
                event = json.loads(text)
            except ValueError:
                continue
            name = event.get("name")
            if name == "producer_send_success":
                self.sent += 1
                self._record(int(event["partition"]), event["timestamp"] / 1000, None)
            elif name == "producer_send_error":
                self.sent += 1
                self._record(-1, event["timestamp"] / 1000,
                             f"{event.get('exception')}: {event.get('message')}")
        self.proc.wait()

    def summary(self, since: float) -> dict[str, Any]:
        """Sends and failures; the slowest acknowledgement (librdkafka) and how many took
        longer than the request timeout; the longest pauses between acknowledgements of
        a partition from `since` on (the stalls the client saw)."""
        with self.lock:
            slowest = max(self.latencies, key=lambda s: s[1], default=None)
            gaps = []
            for times in self.acks.values():
                after = [t for t in times if t >= since]
                gaps.extend(b - a for a, b in zip(after, after[1:], strict=False))
            return {"producer": self.kind, "started_at": round(since, 2),
                    "sends": sum(len(a) for a in self.acks.values()) + len(self.failures),
                    "failed_sends": len(self.failures), "first_failures": self.failures[:3],
                    "slowest_ack_s": None if slowest is None else round(slowest[1], 2),
                    "slowest_ack_sent_at_s": None if slowest is None else round(
                        slowest[0] - since, 2),
                    "acks_over_request_timeout": None if slowest is None else sum(
                        1 for _, v in self.latencies if v > REQUEST_TIMEOUT_S),
                    "longest_ack_gaps_s": [round(g, 2) for g in
                                           sorted(gaps, reverse=True)[:10]]}


def stop_broker(cluster: Cluster | StockKafkaCluster, broker_id: int) -> None:
    """SIGTERM (a controlled shutdown) and wait for the exit."""
    if isinstance(cluster, StockKafkaCluster):
        cluster.nodes[broker_id].app.stop()
    else:
        cluster.brokers[broker_id].stop()


def pick_victim(cluster: Cluster | StockKafkaCluster, topic: str, partitions: int,
                controller_too: bool) -> tuple[int, int, int | None] | None:
    """(partition, its leader, the controller): a leader that is not the controller, or
    (controller_too) the controller leading a partition; None when there is none."""
    controller = cluster.controller()
    leaders = {p: cluster.leader(topic, p) for p in range(partitions)}
    choice = [p for p, b in leaders.items() if (b == controller) == controller_too]
    if not choice:
        print(f"leaders {leaders}, controller {controller}: no partition to kill for this "
              f"mode", flush=True)
        return None
    return choice[0], leaders[choice[0]], controller


def kill_and_measure(cluster: Cluster | StockKafkaCluster, producer: FailoverProducer,
                     topic: str, partitions: int, controller_too: bool, label: str
                     ) -> dict[str, Any] | None:
    """kill -9 a leader; time the new leader and the first acknowledged write; restart
    the dead broker and wait for full ISRs."""
    picked = pick_victim(cluster, topic, partitions, controller_too)
    if picked is None:
        return None
    partition, victim, controller = picked
    cluster.kill(victim)
    killed = time.time()
    new = cluster.wait_leader_not(topic, partition, victim, WAIT_S)
    elected = time.time() - killed
    # the partitions it followed: acks=all with min.insync.replicas=2 goes on once it is
    # out of their ISRs (polled after the new leader, so never less than that)
    wait_for(lambda: all(victim not in cluster.isr(topic, p) for p in range(partitions)),
             WAIT_S * 2, f"broker {victim} out of every ISR", poll_s=0.05)
    out_of_isrs = time.time() - killed
    # reports of answers read before the kill arrive within milliseconds of it
    first = wait_for(lambda: producer.first_ack_after(partition, killed + 0.1),
                     WAIT_S * 2, "an acknowledgement from the new leader")
    row = {"killed": victim, "killed_at": round(killed, 2),
           "was_controller": victim == controller, "partition": partition,
           "new_leader": new, "new_leader_s": round(elected, 2),
           "out_of_every_isr_s": round(out_of_isrs, 2), "first_ack_s": round(first - killed, 2)}
    print(f"{label}: killed broker {victim} (leader of {topic}-{partition}"
          f"{', the controller' if row['was_controller'] else ''}); broker {new} named "
          f"after {row['new_leader_s']}s, out of every ISR after {row['out_of_every_isr_s']}s, "
          f"first acknowledged write after "
          f"{row['first_ack_s']}s", flush=True)
    restarted = time.time()
    cluster.restart(victim)  # returns once it serves
    row["restart_to_serving_s"] = round(time.time() - restarted, 2)
    cluster.wait_full_isr(topic, partitions, WAIT_S * 2)
    row["restart_to_full_isr_s"] = round(time.time() - restarted, 2)
    print(f"{label}: broker {victim} restarted: serving after {row['restart_to_serving_s']}s, "
          f"back in every ISR after {row['restart_to_full_isr_s']}s", flush=True)
    return row


def failover(cluster: Cluster | StockKafkaCluster, args: argparse.Namespace
             ) -> list[dict[str, Any]]:
    """Each round kills the leader of one of three partitions: one that is not the
    controller, or (--kill-controller) the controller's own partition, so a new
    controller has to be elected first."""
    partitions = 3
    topic = f"fo-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    with tempfile.TemporaryDirectory(prefix="failover-producer-") as tmp:
        producer = FailoverProducer(cluster.bootstrap, topic, partitions, args.failover_rate,
                                    args.producer, dict(args.failover_producer_config),
                                    Path(tmp)).start()
        started = time.time()
        rows = []
        try:
            wait_for(lambda: all(len(a) > 20 for a in producer.acks.values()), WAIT_S * 2,
                     "the producer to get going")
            for round_ in range(args.rounds):
                row = kill_and_measure(cluster, producer, topic, partitions,
                                       args.kill_controller, f"failover {round_}")
                if row is not None:
                    rows.append({"round": round_, **row})
                # the producer reconnects to the restarted broker on its own schedule
                # (librdkafka backs off up to reconnect.backoff.max.ms, 10 s by default): the
                # next kill starts from a client that is connected again
                time.sleep(args.settle)
        finally:
            producer.stop()
        summary = producer.summary(started)
    print(f"failover: {summary}", flush=True)
    if rows:
        rows[-1].update(summary)
    return rows


def verifiable(cluster: Cluster | StockKafkaCluster, args: argparse.Namespace
               ) -> dict[str, Any]:
    """The issue's fault run: a producer sends `--verifiable-messages` acks=all records
    at `--verifiable-rate`/s while the cluster goes through five kill -9s (leaders that
    are not the controller and the controller leading a partition, in turn, each
    restarted at once) and then a rolling restart (SIGTERM, start, full ISRs, broker by
    broker). Counted: failed sends, and the longest pauses between acknowledgements."""
    partitions = 3
    topic = f"vp-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    with tempfile.TemporaryDirectory(prefix="verifiable-producer-") as tmp:
        producer = FailoverProducer(cluster.bootstrap, topic, partitions, args.verifiable_rate,
                                    args.producer, dict(args.failover_producer_config),
                                    Path(tmp), max_messages=args.verifiable_messages).start()
        started = time.time()
        kills = []
        try:
            wait_for(lambda: all(len(a) > 20 for a in producer.acks.values()), WAIT_S * 2,
                     "the producer to get going")
            for i in range(5):
                row = kill_and_measure(cluster, producer, topic, partitions, i % 2 == 1,
                                       f"verifiable kill {i}")
                if row is None:  # no partition for that mode now: the other one
                    row = kill_and_measure(cluster, producer, topic, partitions, i % 2 == 0,
                                           f"verifiable kill {i}")
                if row is not None:
                    kills.append(row)
            for broker_id in sorted(cluster.brokers):
                stopped = time.time()
                stop_broker(cluster, broker_id)
                cluster.restart(broker_id)
                cluster.wait_full_isr(topic, partitions, WAIT_S * 2)
                print(f"verifiable: broker {broker_id} restarted (SIGTERM) and back in every "
                      f"ISR after {time.time() - stopped:.2f}s", flush=True)
            wait_for(producer.done, args.verifiable_messages / args.verifiable_rate + WAIT_S * 4,
                     "the producer to send every record")
        finally:
            producer.stop()
        result = {"messages": args.verifiable_messages, "rate": args.verifiable_rate,
                  "kills": kills, "seconds": round(time.time() - started, 1),
                  **producer.summary(started)}
    print(f"verifiable: {result['failed_sends']} of {result['sends']} sends failed; longest "
          f"pauses between acknowledgements {result['longest_ack_gaps_s']}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["throughput", "latency", "failover", "verifiable"],
                    action="append",
                    help="run only this part (repeatable); default all")
    ap.add_argument("--records", type=int, default=300_000,
                    help="1 KiB records per throughput run (default 300,000 = 307 MB)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of throughput topics")
    ap.add_argument("--repeat", type=int, default=2, help="throughput repetitions")
    ap.add_argument("--rate", type=int, default=5000, help="latency: records per second")
    ap.add_argument("--seconds", type=float, default=10.0, help="latency: seconds of load")
    ap.add_argument("--max-in-flight", type=int, default=5,
                    help="latency: the producer's max.in.flight.requests.per.connection "
                         "(5: Kafka's and librdkafka's idempotent default; librdkafka's "
                         "plain default is 1000000)")
    ap.add_argument("--rounds", type=int, default=5, help="failover: kills")
    ap.add_argument("--failover-rate", type=float, default=200.0,
                    help="failover: records per second to the partition")
    ap.add_argument("--kill-controller", action="store_true",
                    help="failover: kill the leader that is also the controller")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="failover: seconds between a restart's full ISR and the next kill")
    ap.add_argument("--failover-producer-config", action="append", default=[],
                    type=lambda kv: tuple(kv.split("=", 1)), metavar="KEY=VALUE",
                    help="failover/verifiable: extra setting of the producer (repeatable)")
    ap.add_argument("--producer", choices=["librdkafka", "java"], default="librdkafka",
                    help="failover/verifiable: confluent-kafka, or Kafka's Java client with "
                         "its defaults through kafka-verifiable-producer.sh (KAFKA_HOME)")
    ap.add_argument("--verifiable-messages", type=int, default=200_000,
                    help="verifiable: records to send (default 200,000, as in the issue)")
    ap.add_argument("--verifiable-rate", type=float, default=1000.0,
                    help="verifiable: records per second")
    ap.add_argument("--timeout", type=float, default=300.0, help="bound of one produce run")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker setting (repeatable)")
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    ap.add_argument("--peer", metavar="HOST:PORT[,...]",
                    help="measure this running 3-broker cluster (stock Kafka) instead: "
                         "throughput and latency only")
    ap.add_argument("--peer-pids", default="", metavar="PID[,...]",
                    help="the peer's broker pids, for its CPU per GB")
    ap.add_argument("--stock-kafka", action="store_true",
                    help="run against a 3-node stock Kafka KRaft cluster started from "
                         "$KAFKA_HOME (Kafka's defaults; --override applies to it), "
                         "failover included")
    ap.add_argument("--kafka-heap", default="-Xmx1G -Xms1G",
                    help="--stock-kafka: KAFKA_HEAP_OPTS of every node (default Kafka's)")
    ap.add_argument("--workdir", type=Path,
                    help="--stock-kafka: the nodes' data and logs here, kept (default: a "
                         "temp dir, deleted at exit)")
    args = ap.parse_args(argv)
    parts = args.only or ["throughput", "latency", "failover"]
    if args.stock_kafka:
        return run_stock_kafka(args, parts)
    if args.peer:
        return run_peer(args, parts)
    reason = unavailable_reason()
    if reason:
        sys.exit(f"cannot run ZooKeeper: {reason}")
    overrides = dict(item.split("=", 1) for item in args.override)
    results: dict[str, Any] = {"machine": machine_info(), "argv": sys.argv,
                               "session_timeout_ms": int(overrides.get(
                                   "zookeeper.session.timeout.ms", SESSION_TIMEOUT_MS))}
    with tempfile.TemporaryDirectory(prefix="pybroker-cluster-bench-") as tmp:
        zookeeper = ZooKeeperServer(Path(tmp) / "zk").start()
        cluster = Cluster(zookeeper, Path(tmp) / "brokers", overrides=overrides)
        try:
            cluster.start()
            run_parts(cluster, args, parts, results)
        finally:
            cluster.close()
            zookeeper.stop()
    summarize(results, args)
    return 0


def run_parts(cluster: Cluster | StockKafkaCluster, args: argparse.Namespace,
              parts: list[str], results: dict[str, Any]) -> None:
    if "throughput" in parts:
        results["throughput"] = throughput(cluster, args)
    if "latency" in parts:
        results["latency"] = latency(cluster, args)
    if "failover" in parts:
        results["failover"] = failover(cluster, args)
    if "verifiable" in parts:
        results["verifiable"] = verifiable(cluster, args)


def run_stock_kafka(args: argparse.Namespace, parts: list[str]) -> int:
    home = os.environ.get("KAFKA_HOME", "")
    if not home:
        sys.exit("--stock-kafka needs KAFKA_HOME (a Kafka distribution)")
    overrides = dict(item.split("=", 1) for item in args.override)
    results: dict[str, Any] = {"machine": machine_info(), "argv": sys.argv,
                               "peer": f"stock Kafka from {home}", "overrides": overrides}
    with tempfile.TemporaryDirectory(prefix="kafka-cluster-bench-") as tmp:
        try:
            kafka = start_kafka_cluster(args.workdir or Path(tmp), 3, overrides,
                                        heap=args.kafka_heap)
        except KafkaUnavailable as exc:
            sys.exit(f"stock Kafka cannot run from {home}: {exc}")
        cluster = StockKafkaCluster(kafka)
        try:
            run_parts(cluster, args, parts, results)
        finally:
            cluster.close()
    summarize(results, args)
    return 0


def run_peer(args: argparse.Namespace, parts: list[str]) -> int:
    if "failover" in parts and args.only:
        sys.exit("failover kills and restarts brokers: only on a cluster the bench owns "
                 "(its own pybroker cluster, or --stock-kafka)")
    cluster = PeerCluster(args.peer, [int(p) for p in args.peer_pids.split(",") if p])
    results: dict[str, Any] = {"machine": machine_info(), "argv": sys.argv,
                               "peer": args.peer}
    if "throughput" in parts:
        results["throughput"] = throughput(cluster, args)
    if "latency" in parts:
        results["latency"] = latency(cluster, args)
    summarize(results, args)
    return 0


def summarize(results: dict[str, Any], args: argparse.Namespace) -> None:
    if "throughput" in results:
        for case in sorted({r["case"] for r in results["throughput"]}):
            runs = [r for r in results["throughput"] if r["case"] == case]
            print(f"{case}: median {statistics.median(r['mb_per_s'] for r in runs)} MB/s "
                  f"acknowledged, {statistics.median(r['replicated_mb_per_s'] for r in runs)} "
                  f"MB/s on every replica, broker CPU "
                  f"{statistics.median(r['broker_cpu_s_per_gb'] for r in runs)} s/GB, client "
                  f"CPU {statistics.median(r['client_cpu_s_per_gb'] for r in runs)} s/GB")
    if "failover" in results and results["failover"]:
        firsts = [r["first_ack_s"] for r in results["failover"]]
        print(f"failover: first acknowledged write {min(firsts)}-{max(firsts)} s after kill -9 "
              f"(median {statistics.median(firsts)})"
              + (f", session timeout {results['session_timeout_ms']} ms"
                 if "session_timeout_ms" in results else ""))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
