"""`pybroker transactions` (kafka-transactions.sh) against a real broker: list and
describe an open transaction, and abort a hanging one with its producer id."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING

from confluent_kafka import Producer

from tests.integration.helpers import create_topic
from tests.integration.rawclient import RawClient
from tests.transaction.txnclients import read_all, settle, txn_producer, wait_for
from tests.transaction.txnraw import init_producer_id, txn_batch

if TYPE_CHECKING:
    from conftest import Broker


def tool(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", "transactions",
                           "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


def test_list_and_describe_an_open_transaction(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    txn_id = f"tool-{uuid.uuid4().hex[:8]}"
    p = txn_producer(broker.bootstrap, txn_id)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"x", partition=0)
    p.produce(topic_name, value=b"y", partition=1)
    p.flush(30)

    listed = tool(broker.bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    rows = table(listed.stdout)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    [mine] = [r for r in rows[1:] if r[0] == txn_id]
    assert mine[1] == "0" and mine[3] == "Ongoing"

    described = tool(broker.bootstrap, "describe", "--transactional-id", txn_id)
    assert described.returncode == 0, described.stderr
    header, row = table(described.stdout)
    assert header == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                      "TransactionState", "TransactionTimeoutMs",
                      "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                      "TopicPartitions"]
    assert row[1] == txn_id and row[2] == mine[2] and row[4] == "Ongoing"
    assert row[5] == "60000" and int(row[7]) >= 0
    assert sorted(row[8].split(",")) == [f"{topic_name}-0", f"{topic_name}-1"]

    p.commit_transaction(30)
    wait_for(lambda: table(tool(broker.bootstrap, "describe", "--transactional-id",
                                txn_id).stdout)[1][4] == "CompleteCommit",
             what="CompleteCommit")
    missing = tool(broker.bootstrap, "describe", "--transactional-id", "no-such-id")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr


def test_find_and_abort_a_hanging_transaction(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    with RawClient(broker.bootstrap) as c:
        # a transactional batch no coordinator knows of: it hangs, holding the LSO
        pid, epoch = init_producer_id(c)
        assert c.produce(topic_name, 0, txn_batch(pid, epoch, 0, ["hanging"])).error_code == 0
    p = txn_producer(broker.bootstrap, f"tool-{uuid.uuid4().hex[:8]}")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"behind", partition=0)
    p.commit_transaction(30)
    assert settle(broker.bootstrap, topic_name, [0], "read_committed") == []

    producers = tool(broker.bootstrap, "describe-producers", "--topic", topic_name,
                     "--partition", "0")
    assert producers.returncode == 0, producers.stderr
    rows = table(producers.stdout)
    assert rows[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                       "LastTimestamp", "CurrentTransactionStartOffset"]
    [hanging] = [r for r in rows[1:] if r[0] == str(pid)]
    assert hanging[1] == str(epoch) and hanging[3] == "0" and hanging[5] == "0"

    found = tool(broker.bootstrap, "find-hanging", "--topic", topic_name,
                 "--max-transaction-timeout", "0")
    assert found.returncode == 0, found.stderr
    rows = table(found.stdout)
    assert rows[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                       "StartOffset", "LastTimestamp", "Duration(min)"]
    assert [(r[0], r[1], r[2], r[5]) for r in rows[1:]] == [(topic_name, "0", str(pid), "0")]

    aborted = tool(broker.bootstrap, "abort", "--topic", topic_name, "--partition", "0",
                   "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stderr
    assert read_all(broker.bootstrap, topic_name, [0], "read_committed",
                    lambda got: b"behind" in got) == [b"behind"]
    assert len(table(tool(broker.bootstrap, "find-hanging", "--topic", topic_name,
                          "--max-transaction-timeout", "0").stdout)) == 1  # the header only


def test_abort_with_the_producer_given(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    with RawClient(broker.bootstrap) as c:
        pid, epoch = init_producer_id(c)
        assert c.produce(topic_name, 0, txn_batch(pid, epoch, 0, ["hanging"])).error_code == 0
        assert c.produce(topic_name, 0, txn_batch(pid, epoch, 1, ["more"])).error_code == 0
    missing = tool(broker.bootstrap, "abort", "--topic", topic_name, "--partition", "0",
                   "--start-offset", "1")
    assert missing.returncode == 1 and "no open transaction" in missing.stderr
    aborted = tool(broker.bootstrap, "abort", "--topic", topic_name, "--partition", "0",
                   "--producer-id", str(pid), "--producer-epoch", str(epoch),
                   "--coordinator-epoch", "0")
    assert aborted.returncode == 0, aborted.stderr
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic_name, value=b"plain", partition=0)
    assert plain.flush(30) == 0
    # the LSO moved past the aborted transaction: only the plain record is read
    assert read_all(broker.bootstrap, topic_name, [0], "read_committed",
                    lambda got: b"plain" in got) == [b"plain"]
    assert settle(broker.bootstrap, topic_name, [0], "read_uncommitted") == [
        b"hanging", b"more", b"plain"]
