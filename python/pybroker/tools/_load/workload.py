"""The produce and consume workloads `pybroker compare` runs (and bench/throughput.py),
with what they measure: records/s and MB/s of a phase, the producer's ack latency, and
the broker's CPU seconds and peak RSS (process tree, psutil) when its PID is known.

The client is confluent-kafka (librdkafka) in this process; every phase gets a fresh
topic and reads what it wrote from offset 0 of every partition (assign(), no group)."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

try:
    import psutil
except ImportError:  # the [load] extra brings it; without it no broker CPU or RSS
    psutil = None

if TYPE_CHECKING:
    from typing_extensions import Self

#: consumer settings every side gets (callers may override them). librdkafka's
#: default fetch.queue.backoff.ms (1,000) makes a 100 B consume measure the client's
#: sleep: one fetch fills the local queue past queued.min.messages (100,000 records),
#: librdkafka then waits a second while the application drains the queue in ~50 ms, and
#: the broker sits idle (see bench/RESULTS.md, issue 18). 10 ms keeps the consumer fed.
CONSUMER_DEFAULTS = {"fetch.queue.backoff.ms": "10"}


def wait_ready(bootstrap: str, timeout: float, proc: subprocess.Popen[bytes] | None,
               log_path: Path | None) -> None:
    """Wait until the broker accepts TCP and answers a Metadata request."""
    host, port = bootstrap.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    last: str = "no attempt"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:] if log_path else ""
            raise RuntimeError(f"broker exited with status {proc.returncode} during startup:\n"
                               f"{tail}")
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                pass
        except OSError as e:
            last = f"connect: {e}"
            time.sleep(0.2)
            continue
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
            admin.list_topics(timeout=min(5.0, max(0.5, deadline - time.monotonic())))
            return
        except KafkaException as e:
            last = f"metadata: {e}"
            time.sleep(0.3)
    raise TimeoutError(f"broker at {bootstrap} not ready after {timeout:.0f}s ({last})")


# --------------------------------------------------------------------------------------------
# resource monitoring


def listener_pid(bootstrap: str) -> int | None:
    """The PID of the process listening, on this machine, on the port of `bootstrap`'s
    first address when that address is this machine's (psutil; None when it is not, or
    when it cannot be told: no psutil, a listener of another user's hidden from us)."""
    if psutil is None:
        return None
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    if not port.isdigit():
        return None
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host.strip("[]"), int(port),
                                                                 proto=socket.IPPROTO_TCP)}
        local = {a.address for nics in psutil.net_if_addrs().values() for a in nics}
        if not addresses & local and not any(ipaddress.ip_address(a.split("%")[0]).is_loopback
                                             for a in addresses):
            return None
        for conn in psutil.net_connections(kind="tcp"):
            if (conn.status == psutil.CONN_LISTEN and conn.laddr and conn.pid
                    and conn.laddr.port == int(port)
                    and (conn.laddr.ip in addresses or conn.laddr.ip in ("0.0.0.0", "::"))):
                return int(conn.pid)
    except (OSError, ValueError, psutil.Error):
        return None
    return None


class Monitor:
    """Broker CPU time and peak RSS over one phase (process + all descendants)."""

    def __init__(self, pid: int | None, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.proc: psutil.Process | None = None
        if pid is not None:
            if psutil is None:
                raise RuntimeError('a broker\'s CPU and RSS need psutil: '
                                   'pip install "pybroker[load]"')
            try:
                self.proc = psutil.Process(pid)
            except psutil.Error:
                self.proc = None
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu0 = 0.0

    def _tree(self) -> list[psutil.Process]:
        assert self.proc is not None
        try:
            return [self.proc, *self.proc.children(recursive=True)]
        except psutil.Error:
            return [self.proc]

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        total = 0.0
        for i, p in enumerate(self._tree()):
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
            if i == 0:  # reaped children are accounted to the root
                total += t.children_user + t.children_system
        return total

    def _rss(self) -> int:
        total = 0
        for p in self._tree():
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _hwm(self) -> int:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_rss = max(self.peak_rss, self._rss())

    def __enter__(self) -> Self:
        if self.proc is None:
            return self
        # reset the kernel's high-water mark so VmHWM covers this phase only
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
        self.peak_rss = self._rss()
        self._cpu0 = self.cpu_seconds()
        self._thread = threading.Thread(target=self._poll, name="rss-poll", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=2)

    def result(self) -> tuple[float | None, int | None]:
        """(cpu seconds in the phase, peak rss bytes) or Nones if unmeasurable."""
        if self.proc is None:
            return None, None
        cpu = self.cpu_seconds() - self._cpu0
        peak = max(self.peak_rss, self._rss(), self._hwm())
        return cpu, peak


# --------------------------------------------------------------------------------------------
# load


class PhaseError(RuntimeError):
    pass


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float,
                 replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)],
        operation_timeout=timeout, request_timeout=timeout,
    )
    futures[topic].result(timeout=timeout)
    wait_all_led(admin, topic, partitions, timeout)


def wait_all_led(admin: AdminClient, topic: str, partitions: int, timeout: float,
                 poll_s: float = 0.2) -> None:
    """Until the metadata shows every partition of the topic with a leader."""
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=max(1.0, deadline - time.monotonic()))
        t = md.topics.get(topic)
        if (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values())):
            return
        if time.monotonic() > deadline:
            raise PhaseError(f"topic {topic}: not every partition led after {timeout} s "
                             f"({t and t.error})")
        time.sleep(poll_s)


def record_value(size: int, compression: str) -> bytes:
    """Random bytes; with a codec, half random and half zeros (about 2:1) so that the
    producer's codec and the broker's decompression (record validation) do real work."""
    if compression == "none":
        return os.urandom(size)
    return os.urandom(size // 2) + bytes(size - size // 2)


def produce(bootstrap: str, topic: str, partitions: int, size: int, n: int,
            timeout: float, compression: str = "none", acks: str = "1",
            stats: Any = None, latencies: list[float] | None = None) -> float:
    """Produce n records of `size` bytes round-robin over partitions; return seconds.

    `stats` is bench/wirestats.py's WireStats (the client's request counters); with
    `latencies` every record's produce-to-ack seconds are appended to it (a delivery
    report per record, which costs the client some throughput)."""
    errors: list[str] = []

    def on_error(err: Any, msg: Any) -> None:
        if err is not None:
            if len(errors) < 10:
                errors.append(str(err))
        elif latencies is not None:
            latencies.append(msg.latency())

    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "compression.type": compression,
        "delivery.report.only.error": latencies is None,
        "message.timeout.ms": int(timeout * 1000),
        "log_level": 3,
        **(stats.config() if stats else {}),
    })
    value = record_value(size, compression)
    # touch the connection and metadata before the clock starts
    p.list_topics(topic, timeout=10)
    if stats:
        stats.start(p)
    deadline = time.monotonic() + timeout
    t0 = time.perf_counter()
    pr = p.produce
    for i in range(n):
        while True:
            try:
                pr(topic, value, partition=i % partitions, on_delivery=on_error)
                break
            except BufferError:
                # the client's queue is full (queue.buffering.max.messages): it waits
                # for acks; how often is a figure of the broker's ack rhythm
                if stats:
                    stats.queue_full += 1
                p.poll(0.01)
                if time.monotonic() > deadline:
                    raise PhaseError(f"produce timed out after {i} records") from None
        if i & 0x3FFF == 0:
            p.poll(0)
            if errors:
                break
            if time.monotonic() > deadline:
                raise PhaseError(f"produce timed out after {i} records")
    remaining = p.flush(max(1.0, deadline - time.monotonic()))
    elapsed = time.perf_counter() - t0
    if stats:
        stats.stop(p)
    p.poll(0)
    if errors:
        raise PhaseError(f"delivery failed: {errors[:3]}")
    if remaining:
        raise PhaseError(f"produce timed out: {remaining} records undelivered")
    return elapsed


def consume(bootstrap: str, topic: str, partitions: int, size: int, n: int,
            timeout: float, idle_timeout: float, extra: dict[str, str] | None = None,
            stats: Any = None) -> float:
    """Read all n records from offset 0 of every partition via assign(); return seconds."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "log_level": 3,
        **(stats.config() if stats else {}),
        **(extra or {}),
    })
    try:
        c.list_topics(topic, timeout=10)
        if stats:
            stats.start(c)
        got = 0
        bad = 0
        t0 = time.perf_counter()
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        last_progress = time.monotonic()
        while got < n:
            msgs = c.consume(num_messages=10_000, timeout=0.5)
            now = time.monotonic()
            if msgs:
                for m in msgs:
                    if m.error() is not None:
                        err = m.error()
                        if err.fatal() or not err.retriable():
                            raise PhaseError(f"consume error: {err}")
                        continue
                    got += 1
                    if len(m) != size:  # len(Message) is the value length
                        bad += 1
                last_progress = now
            elif now - last_progress > idle_timeout:
                raise PhaseError(f"consume stalled at {got}/{n} records")
            if now > deadline:
                raise PhaseError(f"consume timed out at {got}/{n} records")
        elapsed = time.perf_counter() - t0
        if stats:
            stats.stop(c)
        if bad:
            raise PhaseError(f"{bad} records had the wrong size")
        if got != n:
            raise PhaseError(f"consumed {got} records, expected {n}")
        return elapsed
    finally:
        c.close()



def end_to_end(bootstrap: str, topic: str, size: int, n: int, timeout: float,
               acks: str = "1", extra: dict[str, str] | None = None,
               producer_extra: dict[str, Any] | None = None,
               on_record: Callable[[int, float], None] | None = None,
               ) -> tuple[float, list[float]]:
    """Kafka's end-to-end latency measurement: one record at a time to partition 0,
    produced and acknowledged, then read back by a consumer waiting at the log's end;
    return (seconds, each record's produce-to-consume seconds). A first record, not
    counted, opens the connections. `extra` / `producer_extra` are more consumer /
    producer configs; `on_record(i, seconds)` hears of each counted record."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                         "log_level": 3, **(producer_extra or {})})
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-e2e-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "log_level": 3,
        **(extra or {}),
    })
    deadline = time.monotonic() + timeout
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, high)])
        value = os.urandom(size)
        latencies: list[float] = []
        t0 = time.perf_counter()
        for i in range(n + 1):
            start = time.perf_counter()
            producer.produce(topic, value, partition=0)
            if producer.flush(max(0.1, deadline - time.monotonic())):
                raise PhaseError(f"end-to-end: record {i} not acknowledged in time")
            while True:
                msg = consumer.poll(max(0.1, min(1.0, deadline - time.monotonic())))
                if msg is not None and msg.error() is None:
                    break
                if msg is not None and (msg.error().fatal() or not msg.error().retriable()):
                    raise PhaseError(f"end-to-end consume error: {msg.error()}")
                if time.monotonic() > deadline:
                    raise PhaseError(f"end-to-end: record {i} not consumed in time")
            if msg.value() != value:
                raise PhaseError(f"end-to-end: record {i} came back different")
            if i == 0:
                t0 = time.perf_counter()  # the warm-up record
            else:
                latencies.append(time.perf_counter() - start)
                if on_record is not None:
                    on_record(i - 1, latencies[-1])
        return time.perf_counter() - t0, latencies
    finally:
        consumer.close()
