"""A continuous producer for fault tests, and the accounting that checks what it
was told against what the cluster holds.

Each record's value names its producer, partition and sequence number within the
partition (`<tag>:<partition>:<seq>`), so reading a partition back says which
acknowledged records are there, in which order, and how often."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaError, Producer

FLUSH_TIMEOUT_S = 60.0


@dataclasses.dataclass
class Ack:
    seq: int
    offset: int
    at: float  # time.monotonic() when the delivery report arrived


class ContinuousProducer:
    """Produces to every partition of a topic in turn from a thread, at most
    `rate` records a second, and records each delivery report."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, tag: str, *,
                 rate: float = 200.0, config: dict[str, Any] | None = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.tag = tag
        self.rate = rate
        settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
            # long enough to ride out a failover (session timeout + election + retries)
            "message.timeout.ms": 60000, "retry.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
        }
        settings.update(config or {})
        self.idempotent = str(settings.get("enable.idempotence", False)).lower() == "true"
        self.producer = Producer(settings)
        self.acked: dict[int, list[Ack]] = {p: [] for p in range(partitions)}
        self.failed: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        self.sent: dict[int, int] = {p: 0 for p in range(partitions)}
        self.fatal: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"produce-{tag}")

    def value(self, partition: int, seq: int) -> bytes:
        return f"{self.tag}:{partition}:{seq}".encode()

    def start(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        turn = 0
        while not self._stop.is_set():
            partition = turn % self.partitions
            turn += 1
            seq = self.sent[partition]
            try:
                self.producer.produce(self.topic, self.value(partition, seq),
                                      partition=partition,
                                      on_delivery=self._reporter(partition, seq))
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.sent[partition] = seq + 1
            self.producer.poll(0)
            next_at += interval
            pause = next_at - time.monotonic()
            if pause > 0:
                self.producer.poll(pause)
            else:
                next_at = time.monotonic()

    def _reporter(self, partition: int, seq: int) -> Any:
        def report(err: KafkaError | None, msg: Any) -> None:
            with self._lock:
                if err is None:
                    self.acked[partition].append(Ack(seq, msg.offset(), time.monotonic()))
                else:
                    self.failed[partition].append((seq, str(err)))
                    if err.fatal():
                        self.fatal = str(err)
        return report

    def stop(self) -> None:
        """Stop producing and wait (bounded) for every outstanding delivery report."""
        self._stop.set()
        self._thread.join(10)
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        assert remaining == 0, f"{remaining} records of {self.tag} still undelivered"

    # --- what the producer was told -----------------------------------------------------
    def acked_count(self, partition: int | None = None) -> int:
        with self._lock:
            parts = self.acked.values() if partition is None else [self.acked[partition]]
            return sum(len(a) for a in parts)

    def acked_after(self, partition: int, moment: float) -> list[Ack]:
        with self._lock:
            return [a for a in self.acked[partition] if a.at > moment]

    def wait_acked(self, count: int, timeout_s: float, partition: int | None = None) -> None:
        """Wait until `count` more records have been acknowledged (of one partition)."""
        start = self.acked_count(partition)
        deadline = time.monotonic() + timeout_s
        while self.acked_count(partition) < start + count:
            assert self.fatal is None, f"producer {self.tag} hit a fatal error: {self.fatal}"
            assert time.monotonic() < deadline, (
                f"producer {self.tag}: fewer than {count} acks in {timeout_s}s "
                f"(failed so far: {self.failed_summary()})")
            time.sleep(0.05)

    def failed_summary(self) -> dict[int, int]:
        with self._lock:
            return {p: len(f) for p, f in self.failed.items() if f}


@dataclasses.dataclass
class PartitionCheck:
    acked: int
    found: int
    lost: list[int]
    duplicates: int
    out_of_order: list[tuple[int, int]]
    #: (seq, offsets) of the first records read more than once, for the failure report
    duplicated: list[tuple[int, list[int]]] = dataclasses.field(default_factory=list)


def check_partition(producer: ContinuousProducer, partition: int,
                    records: Iterable[tuple[int, bytes]]) -> PartitionCheck:
    """Compare the producer's acknowledged records of one partition with the records
    read back: which are lost, how many copies beyond the first there are, and where
    the order of first copies goes backwards. An acknowledged record must also sit at
    the offset it was acknowledged with."""
    prefix = f"{producer.tag}:{partition}:".encode()
    seqs: list[int] = []
    at_offset: dict[int, int] = {}
    offsets_of: dict[int, list[int]] = {}
    for offset, value in records:
        if value.startswith(prefix):
            seq = int(value[len(prefix):])
            seqs.append(seq)
            at_offset[offset] = seq
            offsets_of.setdefault(seq, []).append(offset)
    seen: set[int] = set()
    firsts: list[int] = []
    for seq in seqs:
        if seq not in seen:
            seen.add(seq)
            firsts.append(seq)
    acked = producer.acked[partition]
    # librdkafka acknowledges an idempotent producer's records whose answer was an error
    # once a later batch of theirs succeeds ("implicitly acked"): their offset is unknown
    # (-1001), so they are checked by presence only
    lost = sorted(a.seq for a in acked
                  if a.seq not in seen or (a.offset >= 0 and at_offset.get(a.offset) != a.seq))
    backwards = [(a, b) for a, b in zip(firsts, firsts[1:], strict=False) if b < a]
    duplicated = [(seq, offsets) for seq, offsets in offsets_of.items() if len(offsets) > 1]
    return PartitionCheck(acked=len(acked), found=len(seen), lost=lost,
                          duplicates=len(seqs) - len(seen), out_of_order=backwards[:10],
                          duplicated=duplicated[:10])


def start_producers(bootstrap: str, topic: str, partitions: int, warmup: int = 30,
                    timeout_s: float = 30.0) -> tuple[ContinuousProducer, ContinuousProducer]:
    """An acks=all producer without idempotence (one request in flight, so its order
    holds across retries) and an idempotent one, both acknowledged `warmup` times."""
    plain = ContinuousProducer(bootstrap, topic, partitions, "plain", config={
        "enable.idempotence": False, "max.in.flight.requests.per.connection": 1}).start()
    idempotent = ContinuousProducer(bootstrap, topic, partitions, "idem", config={
        "enable.idempotence": True}).start()
    for producer in (plain, idempotent):
        producer.wait_acked(warmup, timeout_s)
    return plain, idempotent


def assert_nothing_lost(read: Callable[[int], list[tuple[int, bytes]]], partitions: int,
                        producers: Iterable[ContinuousProducer]) -> dict[str, int]:
    """Stop the producers, read every partition back (`read(partition)`) and check each
    producer's acknowledged records: none lost, first copies in order, and no
    duplicates from an idempotent producer. Returns acknowledged counts per producer."""
    producers = list(producers)
    for producer in producers:
        producer.stop()
    totals: dict[str, int] = {}
    for partition in range(partitions):
        records = read(partition)
        for producer in producers:
            check = check_partition(producer, partition, records)
            assert check.acked > 0, f"{producer.tag}: nothing acknowledged on {partition}"
            assert not check.lost, (
                f"{producer.tag}: {len(check.lost)} of {check.acked} acknowledged records "
                f"of partition {partition} lost: {check.lost[:20]}")
            assert not check.out_of_order, (
                f"{producer.tag}: partition {partition} out of order: {check.out_of_order}")
            if producer.idempotent:
                # to attribute one: `pybroker dump-log-segments --print-data-log` on the
                # leader's segment shows each copy's batch. The same producerEpoch and
                # sequence twice is the broker's fault; a copy under a higher epoch is
                # librdkafka renumbering batches it took for unwritten after an epoch bump
                # (OUT_OF_ORDER_SEQUENCE_NUMBER of a later batch: librdkafka issue 4953)
                assert check.duplicates == 0, (
                    f"{producer.tag}: {check.duplicates} duplicates in partition {partition} "
                    f"(seq, offsets): {check.duplicated}")
            totals[producer.tag] = totals.get(producer.tag, 0) + check.acked
    return totals
