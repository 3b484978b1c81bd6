"""A broker whose open-file limit is far below its partition count: segment files
are opened on demand under a budget derived from RLIMIT_NOFILE (rust/log/src/
file_cache.rs), so 1,500 partitions work under a soft limit of 512 descriptors;
produce, consume and a restart reach every one of them with a real client."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka.admin import NewTopic

from .helpers import admin, assert_delivered, consume_confluent, produce_all, producer, wait_topic

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

NOFILE = 512
PARTITIONS = 1500
#: budget_for_limit(512) in file_cache.rs: 288 cached files + 96 pinned by slices
MAX_LOG_FDS = 288 + 96
TIMEOUT_S = 180.0


def open_log_files(b: Broker) -> int:
    """Descriptors of the broker process that point at segment .log files."""
    assert b.proc is not None
    fd_dir = Path(f"/proc/{b.proc.pid}/fd")
    count = 0
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue  # closed meanwhile
        if target.endswith(".log"):
            count += 1
    return count


def produce_round(b: Broker, topic: str, round_: int) -> None:
    p = producer(b.bootstrap, linger_ms=20, message_timeout_ms=int(TIMEOUT_S * 1000))
    records = [{"partition": i, "value": b"r%d-p%d" % (round_, i)} for i in range(PARTITIONS)]
    reports = produce_all(p, topic, records, timeout=TIMEOUT_S)
    assert_delivered(reports)
    assert sorted((m.partition(), m.offset()) for m in reports) == [
        (i, round_) for i in range(PARTITIONS)]


def check_all(b: Broker, topic: str, rounds: int) -> None:
    got = consume_confluent(b.bootstrap, topic, PARTITIONS * rounds,
                            partitions=list(range(PARTITIONS)), timeout=TIMEOUT_S)
    seen = sorted((g.partition, g.offset, g.value) for g in got)
    assert seen == [(i, r, b"r%d-p%d" % (r, i)) for i in range(PARTITIONS) for r in range(rounds)]


@pytest.mark.timeout(6 * TIMEOUT_S)
def test_more_partitions_than_the_open_file_limit(broker_factory: BrokerFactory,
                                                  topic_name: str) -> None:
    b = broker_factory(start=False)
    b.nofile = NOFILE
    b.start(TIMEOUT_S)
    client = admin(b.bootstrap)  # kept alive until the answer: it owns the futures
    futures = client.create_topics(
        [NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=1)],
        operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    futures[topic_name].result(timeout=TIMEOUT_S)
    wait_topic(b.bootstrap, topic_name, PARTITIONS, timeout=TIMEOUT_S)
    assert len(list((b.data_dir).glob(f"{topic_name}-*/*.log"))) == PARTITIONS

    produce_round(b, topic_name, 0)
    check_all(b, topic_name, 1)
    assert open_log_files(b) <= MAX_LOG_FDS

    assert b.stop(TIMEOUT_S) == 0
    b.start(TIMEOUT_S)
    produce_round(b, topic_name, 1)
    check_all(b, topic_name, 2)
    assert open_log_files(b) <= MAX_LOG_FDS

    # unclean: the records since the last flush come back through recovery
    b.kill()
    b.start(TIMEOUT_S)
    check_all(b, topic_name, 2)
