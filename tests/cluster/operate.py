"""What the issue-15 tests (operating a cluster) share: a broker added to a
running Cluster, the `pybroker` tools run as an operator runs them, and a
consumer reading in the background."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from tests.cluster.cluster import Cluster
from tests.conftest import Broker, free_port

TOOL_TIMEOUT_S = 90


def add_broker(cluster: Cluster, broker_id: int) -> Broker:
    """Start one more broker on the cluster's ZooKeeper chroot (settings as broker 1's)
    and wait until it is registered."""
    template = next(iter(cluster.brokers.values()))
    settings = dict(template.overrides)
    settings["broker.id"] = str(broker_id)
    broker = Broker(host="127.0.0.1", port=free_port(),
                    data_dir=cluster.base / f"broker{broker_id}",
                    log_path=cluster.base / f"broker{broker_id}.log", overrides=settings)
    cluster.brokers[broker_id] = broker
    broker.start()
    cluster.wait_registered(set(cluster.brokers))
    return broker


def tool(*args: str, check: bool = True) -> str:
    """`pybroker <args>`: its stdout (stderr too when it fails)."""
    done = subprocess.run([sys.executable, "-m", "pybroker", *args], capture_output=True,
                          text=True, timeout=TOOL_TIMEOUT_S,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if check:
        assert done.returncode == 0, f"pybroker {' '.join(args)}: {done.returncode}\n" \
                                     f"{done.stdout}\n{done.stderr}"
    return done.stdout


def partition_dirs(broker: Broker, topic: str) -> set[int]:
    """The partitions of `topic` with a log dir on the broker."""
    return {int(p.name.rsplit("-", 1)[1]) for p in broker.data_dir.glob(f"{topic}-*")
            if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()}


class BackgroundConsumer:
    """Reads every partition of a topic from the start, in a thread, counting records
    and errors, with the time of the last record."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bg-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.count = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bg-consumer")

    def start(self) -> BackgroundConsumer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self.consumer.consume(500, timeout=0.2):
                if message.error() is not None:
                    self.errors.append(str(message.error()))
                else:
                    self.count += 1

    def wait_more(self, count: int, timeout_s: float) -> None:
        start = self.count
        deadline = time.monotonic() + timeout_s
        while self.count < start + count:
            assert time.monotonic() < deadline, (
                f"the consumer read only {self.count - start} of {count} more records in "
                f"{timeout_s}s (errors: {self.errors[-5:]})")
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()
