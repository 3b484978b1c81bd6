"""Exactly once through crashes: a consume-transform-produce worker (ctp_worker.py,
confluent-kafka) killed with kill -9 at random points and restarted, the broker
itself killed every few rounds, ends with topic B = f(A) exactly once as a
read_committed consumer sees it."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.helpers import create_topic
from tests.transaction.txnclients import settle

if TYPE_CHECKING:
    from conftest import BrokerFactory

WORKER = Path(__file__).with_name("ctp_worker.py")
PARTITIONS = 3
#: unprocessed records of A kept before each worker starts: enough work that a
#: worker is still busy when it is killed, little enough for the final run
BACKLOG = 450
KILLS = 20
ROUNDS_MAX = 40
#: every this many worker kills the broker is killed (kill -9) and restarted too
BROKER_KILL_EVERY = 5
FINAL_RUN_S = 90.0
#: records per transaction and a pause inside each, so kills land mid-run
BATCH = 10
PAUSE_MS = 40


def test_consume_transform_produce_exactly_once_through_kill_9(
        broker_factory: BrokerFactory, tmp_path: Path) -> None:
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    create_topic(b.bootstrap, "ctp-a", partitions=PARTITIONS)
    create_topic(b.bootstrap, "ctp-b", partitions=PARTITIONS)
    source = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
    expected: list[bytes] = []

    def feed(count: int) -> None:
        """More input: the workers never run out of work between kills."""
        for _ in range(count):
            value = b"a-%d" % len(expected)
            source.produce("ctp-a", value=value, partition=len(expected) % PARTITIONS)
            expected.append(b"B:" + value)
        assert source.flush(30) == 0

    progress = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ctp-group",
                         "isolation.level": "read_committed"})

    def backlog() -> int:
        committed = progress.committed([TopicPartition("ctp-a", p) for p in range(PARTITIONS)],
                                       timeout=30)
        return len(expected) - sum(max(tp.offset, 0) for tp in committed)

    feed(BACKLOG)
    rng = random.Random(13)
    argv = [sys.executable, str(WORKER), b.bootstrap, "ctp-a", "ctp-b", "ctp-group", "ctp-txn",
            str(PARTITIONS), str(BATCH), str(PAUSE_MS)]
    log = open(tmp_path / "worker.log", "ab")  # noqa: SIM115 - closed below
    kills = 0
    try:
        for _ in range(ROUNDS_MAX):
            if kills >= KILLS:
                break
            feed(max(0, BACKLOG - backlog()))
            worker = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            time.sleep(rng.uniform(0.5, 3.0))
            if worker.poll() is not None:  # it caught up before the kill
                assert worker.returncode == 0, (tmp_path / "worker.log").read_text()[-3000:]
                continue
            kills += 1
            kill_broker = kills % BROKER_KILL_EVERY == 0
            if kill_broker:  # the broker first, under the running worker
                b.kill()
            worker.kill()
            worker.wait(10)
            if kill_broker:
                b.start()
        assert kills >= KILLS, f"only {kills} workers were killed mid-run"
        worker = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            assert worker.wait(FINAL_RUN_S) == 0, (tmp_path / "worker.log").read_text()[-3000:]
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
    finally:
        log.close()
        progress.close()

    got = settle(b.bootstrap, "ctp-b", list(range(PARTITIONS)), "read_committed")
    duplicates = len(got) - len(set(got))
    assert duplicates == 0, f"{duplicates} records of B written twice"
    assert sorted(got) == sorted(expected), (
        f"B has {len(got)} records, expected {len(expected)}; missing "
        f"{sorted(set(expected) - set(got))[:10]}")
    # the aborted attempts are in the log all the same (kill -9 mid-transaction)
    uncommitted = settle(b.bootstrap, "ctp-b", list(range(PARTITIONS)), "read_uncommitted")
    assert len(uncommitted) >= len(got)
