"""A failed fsync takes the log dir offline, as Kafka's LogDirFailureChannel does.

The integration test makes the kernel answer EIO to a running broker's fsyncs (strace's
fault injection, attached to the broker process): the record whose flush failed is not
acknowledged, the broker halts once its only dir has failed (Kafka's "all log dirs have
failed"), and after a restart every acknowledged record is read back. The unit tests
cover what one broker process cannot show with one dir: with two dirs, the other keeps
serving, and the checkpoints of the failed one are no longer written."""

from __future__ import annotations

import shutil
import uuid
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer
from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker import _core
from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.errors import ErrorCode
from pybroker.errors import KafkaError as BrokerKafkaError
from pybroker.log.dir_failure import LogDirFailures
from pybroker.log.manager import LogManager

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS)]
from integration.helpers import create_topic  # noqa: E402

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

WAIT_S = 60.0
ACKED = 20


def produce(broker: Broker, topic: str, values: list[bytes],
            timeout_ms: int = 30_000) -> tuple[list[bytes], list[object]]:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "message.timeout.ms": timeout_ms, "retries": 0})
    acked: list[bytes] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked.append(msg.value())  # type: ignore[attr-defined]
        else:
            errors.append(err)

    for value in values:
        producer.produce(topic, value=value, on_delivery=on_delivery)
    producer.flush(WAIT_S)
    return acked, errors


def read_all(broker: Broker, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dir-failure",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    idle_deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < idle_deadline:
            msgs = consumer.consume(100, timeout=1.0)
            for msg in msgs:
                if msg.error() is None:
                    values.append(msg.value())
            if len(values) >= ACKED and not msgs:
                break
    finally:
        consumer.close()
    return values


def attach_eio_on_fsync(pid: int, paths: list[str] | None = None) -> subprocess.Popen[bytes]:
    """strace attached to every thread of `pid`, failing each fsync/fdatasync with EIO;
    with `paths`, only those of files open under these exact paths."""
    only = [arg for path in paths or () for arg in ("-P", path)]
    tracer = subprocess.Popen(
        ["strace", "-f", "-qq", "-p", str(pid), *only, "-e", "trace=fsync,fdatasync",
         "-e", "inject=fsync:error=EIO", "-e", "inject=fdatasync:error=EIO",
         "-o", "/dev/null"], stderr=subprocess.PIPE)
    # strace attaches before it reads its first event; give it a bounded moment and check
    # it is still there (a refused ptrace exits at once)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and tracer.poll() is None:
        status = Path(f"/proc/{pid}/status").read_text()
        if any(line.startswith("TracerPid:") and line.split()[1] != "0"
               for line in status.splitlines()):
            return tracer
        time.sleep(0.05)
    tracer.kill()
    pytest.skip(f"strace cannot attach here: {tracer.stderr.read().decode()[-300:]}"
                if tracer.stderr else "strace cannot attach here")


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_failed_fsync_halts_a_one_dir_broker_and_loses_no_acknowledged_record(
        broker_factory: BrokerFactory, topic_name: str) -> None:
    broker = broker_factory()
    # every append is fsynced, so the next produce's flush meets the injected error
    create_topic(broker.bootstrap, topic_name, config={"flush.messages": "1"})
    acked, errors = produce(broker, topic_name, [b"acked-%d" % i for i in range(ACKED)])
    assert len(acked) == ACKED and not errors, errors

    assert broker.proc is not None
    tracer = attach_eio_on_fsync(broker.proc.pid)
    try:
        late_acked, late_errors = produce(broker, topic_name, [b"after-eio"], timeout_ms=15_000)
        assert late_acked == [], "a record whose fsync failed was acknowledged"
        assert late_errors, "no delivery report for the record whose fsync failed"
        assert broker.proc.wait(WAIT_S) == 1
    finally:
        tracer.kill()
        tracer.wait(10)
    broker.kill()  # closes the log file
    text = broker.log_path.read_text().rsplit("===== start", 1)[-1]
    assert f"log dir {broker.data_dir} failed (fsync of {topic_name}-0: " in text, text
    assert "Check the disk and the kernel log" in text, text
    assert "shutting down: every log dir" in text, text

    broker.start()
    assert set(acked) <= set(read_all(broker, topic_name))


class FailingFlush:
    """A PartitionLog whose fsync fails as a dying disk's does (the rest is the real log)."""

    def __init__(self, real: _core.PartitionLog) -> None:
        self._real = real

    def flush(self) -> None:
        raise _core.StorageError("fsync: Input/output error (os error 5)")

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


def record(name: str, partitions: int) -> TopicRecord:
    return TopicRecord(name, uuid.uuid4(), [
        PartitionState(leader=1, leader_epoch=0, replicas=[1], isr=[1])
        for _ in range(partitions)], {})


def test_with_two_dirs_only_the_failed_one_goes_offline(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    config = BrokerConfig({"log.dirs": f"{dirs[0]},{dirs[1]}"})
    manager = LogManager(config, "cluster")
    halted: list[bool] = []
    manager.failures = LogDirFailures(manager.dirs, on_all_failed=lambda: halted.append(True))
    manager.startup()
    topic = record("t", 2)
    parts = [manager.open_partition(topic, i) for i in range(2)]
    assert {p.directory.parent for p in parts} == set(dirs)
    doomed = next(p for p in parts if p.directory.parent == dirs[0])
    kept = next(p for p in parts if p.directory.parent == dirs[1])
    for p in parts:
        p.append(memoryview(_one_batch()), leader_epoch=0)
    doomed.log = FailingFlush(doomed.log)  # type: ignore[assignment]
    with pytest.raises(_core.StorageError):
        doomed.flush()
    assert doomed.offline and not kept.offline and not halted
    kept.flush()  # the other dir still works
    # the failed dir's checkpoints are left as they were; the other's are written
    before = {f: (dirs[0] / f).exists() for f in ("recovery-point-offset-checkpoint",)}
    manager.write_checkpoints()
    assert (dirs[1] / "recovery-point-offset-checkpoint").exists()
    assert {f: (dirs[0] / f).exists() for f in before} == before
    # new partitions go to the dir that is still online
    assert manager.open_partition(record("u", 1), 0).directory.parent == dirs[1]
    # the second dir failing too halts
    kept.log = FailingFlush(kept.log)  # type: ignore[assignment]
    with pytest.raises(_core.StorageError):
        kept.flush()
    assert halted == [True]


def test_an_offline_partition_answers_kafka_storage_error(tmp_path: Path) -> None:
    from pybroker.purgatory import Purgatory
    from pybroker.replica.partition import ReplicaPartition

    config = BrokerConfig({"log.dirs": str(tmp_path / "a")})
    manager = LogManager(config, "cluster")
    manager.failures = LogDirFailures(manager.dirs, on_all_failed=lambda: None)
    manager.startup()
    log = manager.open_partition(record("t", 1), 0)
    replica = ReplicaPartition(log, 1, Purgatory())
    from pybroker.replica.manager import ReplicaManager
    replicas = ReplicaManager.__new__(ReplicaManager)
    replicas.partitions = {("t", 0): replica}
    manager.failures.fail(tmp_path / "a", "test", OSError(5, "Input/output error"))
    with pytest.raises(BrokerKafkaError) as exc:
        replicas._hosted("t", 0)
    assert exc.value.code is ErrorCode.KAFKA_STORAGE_ERROR


def _one_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=0, key=None, value=b"v", headers=[])
    return bytes(builder.build())


def test_a_shutdown_marks_only_the_dirs_that_did_not_fail(tmp_path: Path) -> None:
    """The clean-shutdown marker vouches that a dir's logs need no recovery: a failed
    dir must not get one (its next start recovers every log), nor may its closing
    stop the others from being closed and marked."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    config = BrokerConfig({"log.dirs": f"{dirs[0]},{dirs[1]}"})
    manager = LogManager(config, "cluster")
    manager.failures = LogDirFailures(manager.dirs, on_all_failed=lambda: None)
    manager.startup()
    parts = [manager.open_partition(record("t", 2), i) for i in range(2)]
    doomed = next(p for p in parts if p.directory.parent == dirs[0])
    for p in parts:
        p.append(memoryview(_one_batch()), leader_epoch=0)
    doomed.log = FailingFlush(doomed.log)  # type: ignore[assignment]
    with pytest.raises(_core.StorageError):
        doomed.flush()
    manager.shutdown()
    assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    assert (dirs[1] / ".kafka_cleanshutdown").exists()
