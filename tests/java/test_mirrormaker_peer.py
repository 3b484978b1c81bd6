"""MirrorMaker 2 (connect-mirror-maker.sh, dedicated mode) between a stock Kafka KRaft
broker started from $KAFKA_HOME and pybroker, each way (and Kafka -> Kafka, the reference):
100,000 records of a 3-partition topic arrive on the target record for record, and a
consumer group that read the first 60,000 on the source has its committed offsets
translated by MirrorCheckpointConnector (sync.group.offsets.enabled) onto the target, so
a consumer of that group on the target resumes exactly where it stopped: it reads the
remaining 40,000 records, none missing and none twice.

A second test mirrors a transactional source (MM2's consumer at read_committed): 80 of
100 transactions committed, the target gets only their records at dense offsets while the
source's offsets skip a commit marker per transaction and the aborted records, and the
group is translated exactly across those gaps. A third runs MM2 with exactly-once
delivery into the target (KIP-618: fenced task producers, transactional writes), so the
target's offsets carry commit markers the source's do not.

Exactness is what MM2 promises here: offset.lag.max=0 makes every replicated record an
offset sync (the latest one per partition is always kept and sent), and with a source
topic written by one plain producer (no transactions) upstream and downstream offsets
are equal.
Skipped without KAFKA_HOME, or when the distribution cannot run a broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerFactory
from tests.java.conftest import StockKafkaFactory
from tests.java.kafka import App, app, requires_kafka, wait_until, write_properties

pytestmark = [requires_kafka, pytest.mark.timeout(1800)]

TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 3
RECORDS = 100_000
FIRST = 60_000  # the group reads and commits this many on the source before moving
REPLICATION_TIMEOUT_S = 900.0
TRANSLATION_TIMEOUT_S = 300.0
SOURCE, TARGET = "source", "target"  # MM2 cluster aliases
REMOTE = f"{SOURCE}.{TOPIC}"  # DefaultReplicationPolicy's name on the target


def partition_of(i: int) -> int:
    return i % PARTITIONS


def value_of(i: int) -> bytes:
    return f"record-{i:06d}".encode()


def expected(records: Iterable[int]) -> dict[int, list[bytes]]:
    """Per partition, the values the producer wrote there, in offset order."""
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in records:
        out[partition_of(i)].append(value_of(i))
    return out


def counts(records: Iterable[int]) -> dict[int, int]:
    return {p: len(v) for p, v in expected(records).items()}


def produce(bootstrap: str, records: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         # idempotence keeps each partition in produce order when the first
                         # batches to a just-created topic are retried
                         "linger.ms": 20, "enable.idempotence": True})
    failed: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))
    for i in records:
        while True:
            try:
                producer.produce(TOPIC, key=str(i).encode(), value=value_of(i),
                                 partition=partition_of(i), on_delivery=delivered)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.5)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert not failed, f"{len(failed)} records not delivered, first: {failed[0]}"


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-peer-watermarks"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                for p in range(PARTITIONS)}
    except Exception:  # topic not created on the target yet: keep polling
        return {}
    finally:
        c.close()


def committed(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                     timeout=30)
    except Exception:  # coordinator not ready yet: keep polling
        return {}
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in offsets if tp.offset >= 0}


def read_partitions(bootstrap: str, topic: str, want: dict[int, int]) -> dict[int, list]:
    """Every record of `topic` from offset 0 up to `want[p]` records per partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-peer-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in want])
    got: dict[int, list] = {p: [] for p in want}

    def more() -> bool:
        for m in consumer.consume(1000, 1.0):
            if not m.error():
                got[m.partition()].append((m.offset(), m.key(), m.value()))
        return all(len(got[p]) >= n for p, n in want.items())
    try:
        wait_until(more, 300, f"{want} records of {topic}", poll=0,
                   on_timeout=lambda: str({p: len(v) for p, v in got.items()}))
    finally:
        consumer.close()
    return got


def consume_as_group(bootstrap: str, topic: str, n: int,
                     commit: bool) -> dict[int, list[tuple[int, bytes]]]:
    """Subscribe as GROUP (from its committed offsets; earliest when it has none), read
    `n` records (then a little longer, to catch any extra), commit if asked, and leave."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    total = 0

    def more() -> bool:
        nonlocal total
        for m in consumer.consume(1000, 1.0):
            if not m.error():
                got[m.partition()].append((m.offset(), m.value()))
                total += 1
        return total >= n
    try:
        wait_until(more, 300, f"group {GROUP} to read {n} records of {topic}", poll=0,
                   on_timeout=lambda: str({p: len(v) for p, v in got.items()}))
        for m in consumer.consume(1000, 3.0):  # anything beyond n is a duplicate
            if not m.error():
                got[m.partition()].append((m.offset(), m.value()))
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def mm2_properties(path: Path, source: str, target: str, **extra: str) -> Path:
    return write_properties(path, {
        "clusters": f"{SOURCE}, {TARGET}",
        f"{SOURCE}.bootstrap.servers": source, f"{TARGET}.bootstrap.servers": target,
        f"{SOURCE}->{TARGET}.enabled": "true", f"{SOURCE}->{TARGET}.topics": TOPIC,
        f"{TARGET}->{SOURCE}.enabled": "false", "replication.factor": "1",
        **{f"{t}.replication.factor": "1" for t in (
            "checkpoints.topic", "heartbeats.topic", "offset-syncs.topic",
            "offset.storage", "status.storage", "config.storage")},
        "refresh.topics.interval.seconds": "2", "refresh.groups.interval.seconds": "2",
        "emit.checkpoints.interval.seconds": "1", "emit.heartbeats.interval.seconds": "1",
        "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
        "offset.lag.max": "0", **extra})


BootstrapOf = Callable[[str], str]


@pytest.fixture
def start_side(stock_kafka_factory: StockKafkaFactory,
               broker_factory: BrokerFactory) -> BootstrapOf:
    """`start_side("kafka")` or `start_side("pybroker")`: a fresh broker, its bootstrap."""
    def start(kind: str) -> str:
        if kind == "kafka":
            return stock_kafka_factory().bootstrap
        return broker_factory().bootstrap
    return start


DIRECTIONS = pytest.mark.parametrize(("source_kind", "target_kind"), [
    ("kafka", "pybroker"), ("pybroker", "kafka"), ("kafka", "kafka")],
    ids=["kafka-to-pybroker", "pybroker-to-kafka", "kafka-to-kafka"])


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need the handle
    admin.create_topics(
        [NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(60)


@DIRECTIONS
def test_mirror_100k_records_and_translate_group_offsets(
        start_side: BootstrapOf, source_kind: str, target_kind: str, tmp_path: Path,
        record_property: Callable[[str, object], None]) -> None:
    source, target = start_side(source_kind), start_side(target_kind)
    create_topic(source)
    first, rest, every = range(FIRST), range(FIRST, RECORDS), range(RECORDS)
    produce(source, first)

    mm2 = app("connect-mirror-maker.sh", str(mm2_properties(tmp_path / "mm2.properties",
                                                             source, target)),
              log_path=tmp_path / "mm2.log")
    running: list[App] = [mm2.start()]
    started = time.monotonic()
    try:
        # the group reads the first records on the source while MM2 replicates them
        read = consume_as_group(source, TOPIC, FIRST, commit=True)
        assert {p: [v for _, v in r] for p, r in read.items()} == expected(first)
        wait_until(lambda: high_watermarks(target, REMOTE) == counts(first),
                   REPLICATION_TIMEOUT_S, f"{REMOTE} on the target to hold {FIRST} records",
                   on_timeout=mm2.log_tail)
        wait_until(lambda: committed(target, REMOTE) == counts(first), TRANSLATION_TIMEOUT_S,
                   f"group {GROUP}'s offsets translated onto the target",
                   on_timeout=lambda: f"{committed(target, REMOTE)}\n" + mm2.log_tail())

        produce(source, rest)
        wait_until(lambda: high_watermarks(target, REMOTE) == counts(every),
                   REPLICATION_TIMEOUT_S, f"{REMOTE} on the target to hold {RECORDS} records",
                   on_timeout=mm2.log_tail)
        replicated_s = time.monotonic() - started
        on_target = read_partitions(target, REMOTE, counts(every))
        for p, values in expected(every).items():
            assert [v for _, _, v in on_target[p]] == values, f"partition {p} differs"
            assert [o for o, _, _ in on_target[p]] == list(range(len(values)))
            assert all(k == str(int(v[7:])).encode() for _, k, v in on_target[p])

        # the group moves to the target: it resumes at the translated offsets
        resumed = consume_as_group(target, REMOTE, len(rest), commit=False)
        for p, values in expected(rest).items():
            assert [o for o, _ in resumed[p]][:1] == [counts(first)[p]], f"partition {p}"
            assert [v for _, v in resumed[p]] == values, f"partition {p}: gap or duplicate"
        topics = AdminClient({"bootstrap.servers": target}).list_topics(timeout=30).topics
        assert {"heartbeats", f"{SOURCE}.checkpoints.internal"} <= set(topics)
    finally:
        for proc in running:
            proc.stop(60)
    record_property("records", RECORDS)
    record_property("replicated_s", round(replicated_s, 1))
    print(f"\n{source_kind} -> {target_kind}: {RECORDS} records mirrored and checked in "
          f"{replicated_s:.0f} s from MM2 start (group offsets translated exactly)")


# --- a transactional source: upstream offsets with gaps (control records, aborted data) --
TXN_SIZE = 200  # records per transaction, spread over every partition
TXNS = 100
TXN_FIRST = 60  # transactions the group reads and commits on the source before moving


def aborted(txn: int) -> bool:
    return txn % 5 == 4


def txn_records(txns: range) -> list[int]:
    """The records of the committed transactions among `txns`."""
    return [i for t in txns if not aborted(t) for i in range(t * TXN_SIZE, (t + 1) * TXN_SIZE)]


def produce_transactions(bootstrap: str, txns: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "transactional.id": f"mm2-peer-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(60)
    for t in txns:
        producer.begin_transaction()
        for i in range(t * TXN_SIZE, (t + 1) * TXN_SIZE):
            producer.produce(TOPIC, key=str(i).encode(), value=value_of(i),
                             partition=partition_of(i))
        if aborted(t):
            # delivered first, so the aborted records are in the log for read_committed
            # to skip (an abort purges what is still queued; and with nothing added to
            # the transaction yet, EndTxn would be refused: librdkafka issue 4849)
            assert producer.flush(60) == 0
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)


@DIRECTIONS
def test_mirror_transactional_source_translates_offsets_across_markers(
        start_side: BootstrapOf, source_kind: str, target_kind: str, tmp_path: Path) -> None:
    """MM2's source consumer at read_committed: the aborted records stay behind, the
    target's offsets are dense while the source's skip a control record per transaction
    (and the aborted records), and the group's offsets are still translated exactly."""
    source, target = start_side(source_kind), start_side(target_kind)
    create_topic(source)
    first, every = txn_records(range(TXN_FIRST)), txn_records(range(TXNS))
    rest = txn_records(range(TXN_FIRST, TXNS))
    produce_transactions(source, range(TXN_FIRST))
    source_ends = high_watermarks(source, TOPIC)
    assert all(source_ends[p] > n for p, n in counts(first).items())  # markers, aborted data

    props = mm2_properties(tmp_path / "mm2.properties", source, target,
                           **{f"{SOURCE}.consumer.isolation.level": "read_committed"})
    mm2 = app("connect-mirror-maker.sh", str(props), log_path=tmp_path / "mm2.log")
    running: list[App] = [mm2.start()]
    try:
        read = consume_as_group(source, TOPIC, len(first), commit=True)  # read_committed
        assert {p: [v for _, v in r] for p, r in read.items()} == expected(first)
        wait_until(lambda: high_watermarks(target, REMOTE) == counts(first),
                   REPLICATION_TIMEOUT_S, f"{REMOTE} on the target to hold the committed "
                   f"records of {TXN_FIRST} transactions", on_timeout=mm2.log_tail)
        wait_until(lambda: committed(target, REMOTE) == counts(first), TRANSLATION_TIMEOUT_S,
                   f"group {GROUP}'s offsets translated onto the target",
                   on_timeout=lambda: f"{committed(target, REMOTE)}\n" + mm2.log_tail())

        produce_transactions(source, range(TXN_FIRST, TXNS))
        wait_until(lambda: high_watermarks(target, REMOTE) == counts(every),
                   REPLICATION_TIMEOUT_S, f"{REMOTE} on the target to hold every committed "
                   "record", on_timeout=mm2.log_tail)
        on_target = read_partitions(target, REMOTE, counts(every))
        for p, values in expected(every).items():
            assert [v for _, _, v in on_target[p]] == values, f"partition {p} differs"

        resumed = consume_as_group(target, REMOTE, len(rest), commit=False)
        for p, values in expected(rest).items():
            assert [o for o, _ in resumed[p]][:1] == [counts(first)[p]], f"partition {p}"
            assert [v for _, v in resumed[p]] == values, f"partition {p}: gap or duplicate"
    finally:
        for proc in running:
            proc.stop(60)


# --- exactly-once delivery into the target (KIP-618) ----------------------------------
EOS_RECORDS = 20_000
EOS_FIRST = 12_000


@DIRECTIONS
def test_mirror_exactly_once_into_target(start_side: BootstrapOf, source_kind: str,
                                         target_kind: str, tmp_path: Path) -> None:
    """exactly.once.source.support=enabled for the target: MM2's workers fence zombie
    task producers and write records, source offsets and offset syncs in transactions on
    the target, so the target's offsets are no longer the source's (a commit marker per
    transaction); a read_committed consumer sees every record once and the group's
    offsets are still translated to where it stopped."""
    source, target = start_side(source_kind), start_side(target_kind)
    create_topic(source)
    first, rest, every = range(EOS_FIRST), range(EOS_FIRST, EOS_RECORDS), range(EOS_RECORDS)
    produce(source, first)
    props = mm2_properties(tmp_path / "mm2.properties", source, target, **{
        f"{TARGET}.exactly.once.source.support": "enabled",
        f"{SOURCE}.consumer.isolation.level": "read_committed"})
    mm2 = app("connect-mirror-maker.sh", str(props), log_path=tmp_path / "mm2.log")
    running: list[App] = [mm2.start()]

    def on_target() -> dict[int, list[tuple[int, bytes]]]:
        """Per partition, the (offset, value)s a read_committed reader finds on the target."""
        c = Consumer({"bootstrap.servers": target, "group.id": "mm2-peer-count",
                      "enable.auto.commit": False, "isolation.level": "read_committed"})
        try:
            ends = {p: c.get_watermark_offsets(TopicPartition(REMOTE, p), timeout=5)[1]
                    for p in range(PARTITIONS)}
        except Exception:  # not created on the target yet
            return {}
        finally:
            c.close()
        if any(e <= 0 for e in ends.values()):
            return {}
        try:  # ends are last stable offsets (read_committed): everything below is decided
            return read_partitions_to(target, REMOTE, ends)
        except AssertionError:  # not read to the end in time: poll again
            return {}

    def holds(records: range) -> dict[int, list[tuple[int, bytes]]] | None:
        got = on_target()
        return got if {p: len(v) for p, v in got.items()} == counts(records) else None

    try:
        read = consume_as_group(source, TOPIC, len(first), commit=True)
        assert {p: [v for _, v in r] for p, r in read.items()} == expected(first)
        replicated = wait_until(lambda: holds(first), REPLICATION_TIMEOUT_S,
                                f"{REMOTE} on the target to hold {EOS_FIRST} committed "
                                "records", poll=2.0, on_timeout=mm2.log_tail)
        assert {p: [v for _, v in r] for p, r in replicated.items()} == expected(first)
        # the group stopped after its last record on the source: translated, it is one
        # past that record's offset on the target (a commit marker may sit there; a
        # consumer steps over it)
        translated = {p: r[-1][0] + 1 for p, r in replicated.items()}
        wait_until(lambda: committed(target, REMOTE) == translated, TRANSLATION_TIMEOUT_S,
                   f"group {GROUP}'s offsets translated onto the target ({translated})",
                   on_timeout=lambda: f"{committed(target, REMOTE)}\n" + mm2.log_tail())

        produce(source, rest)
        wait_until(lambda: holds(every), REPLICATION_TIMEOUT_S,
                   f"{REMOTE} on the target to hold {EOS_RECORDS} committed records",
                   poll=2.0, on_timeout=mm2.log_tail)
        resumed = consume_as_group(target, REMOTE, len(rest), commit=False)
        for p, values in expected(rest).items():
            assert [v for _, v in resumed[p]] == values, f"partition {p}: gap or duplicate"
        ends = high_watermarks(target, REMOTE)
        assert any(ends[p] > n for p, n in counts(every).items()), \
            "no commit markers on the target: MM2 did not write transactionally"
    finally:
        for proc in running:
            proc.stop(60)


def read_partitions_to(bootstrap: str, topic: str, ends: dict[int, int]
                       ) -> dict[int, list[tuple[int, bytes]]]:
    """read_committed, every record of each partition below `ends[p]` (an offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-peer-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in ends}
    done: set[int] = set()

    def more() -> bool:
        for m in consumer.consume(1000, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends[
                        m.partition()]:
                    done.add(m.partition())
                continue
            if m.offset() < ends[m.partition()]:
                got[m.partition()].append((m.offset(), m.value()))
            else:
                done.add(m.partition())
        return done == set(ends)
    try:
        wait_until(more, 60, f"{topic} read to {ends}", poll=0)
    finally:
        consumer.close()
    return got
