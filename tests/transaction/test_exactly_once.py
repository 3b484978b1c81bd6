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

from confluent_kafka import Producer

from tests.integration.helpers import create_topic
from tests.transaction.txnclients import settle

if TYPE_CHECKING:
    from conftest import BrokerFactory

WORKER = Path(__file__).with_name("ctp_worker.py")
PARTITIONS = 3
RECORDS = 3000
KILLS = 20
#: every this many worker kills the broker is killed (kill -9) and restarted too
BROKER_KILL_EVERY = 5
FINAL_RUN_S = 90.0
#: records per transaction and a pause inside each: a whole run takes far longer
#: than the kill windows, so every kill lands mid-run
BATCH = 10
PAUSE_MS = 40


def test_consume_transform_produce_exactly_once_through_kill_9(
        broker_factory: BrokerFactory, tmp_path: Path) -> None:
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    create_topic(b.bootstrap, "ctp-a", partitions=PARTITIONS)
    create_topic(b.bootstrap, "ctp-b", partitions=PARTITIONS)
    source = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
    expected = []
    for i in range(RECORDS):
        value = b"a-%d" % i
        source.produce("ctp-a", value=value, partition=i % PARTITIONS)
        expected.append(b"B:" + value)
    assert source.flush(30) == 0

    rng = random.Random(13)
    argv = [sys.executable, str(WORKER), b.bootstrap, "ctp-a", "ctp-b", "ctp-group", "ctp-txn",
            str(PARTITIONS), str(BATCH), str(PAUSE_MS)]
    log = open(tmp_path / "worker.log", "ab")  # noqa: SIM115 - closed below
    try:
        for round_ in range(KILLS):
            worker = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            time.sleep(rng.uniform(0.5, 3.0))
            kill_broker = (round_ + 1) % BROKER_KILL_EVERY == 0
            if kill_broker:  # the broker first, under the running worker
                b.kill()
            worker.kill()
            worker.wait(10)
            if kill_broker:
                b.start()
        worker = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            assert worker.wait(FINAL_RUN_S) == 0, (tmp_path / "worker.log").read_text()[-3000:]
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
    finally:
        log.close()

    runs = (tmp_path / "worker.log").read_text()
    assert runs.count("caught up") == 1, "a worker finished before it was killed"
    assert runs.count("committed") > KILLS, "the killed workers made no progress"

    got = settle(b.bootstrap, "ctp-b", list(range(PARTITIONS)), "read_committed")
    duplicates = len(got) - len(set(got))
    assert duplicates == 0, f"{duplicates} records of B written twice"
    assert sorted(got) == sorted(expected), (
        f"B has {len(got)} records, expected {len(expected)}; missing "
        f"{sorted(set(expected) - set(got))[:10]}")
    # the aborted attempts are in the log all the same (kill -9 mid-transaction)
    uncommitted = settle(b.bootstrap, "ctp-b", list(range(PARTITIONS)), "read_uncommitted")
    assert len(uncommitted) >= len(got)
