"""Transactions across a coordinator failover (issue 13, cluster mode).

A transactional id's coordinator is the leader of its `__transaction_state`
partition. Killing that broker (kill -9) mid-transaction moves the partition to
another replica, which loads the transaction state from the log; the
transaction then commits or aborts as a whole, and read_committed readers see
all of it or none of it. Markers go to partition leaders on other brokers with
WriteTxnMarkers."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, java_string_hash, wait_for
from tests.cluster.zookeeper import ZooKeeperServer
from tests.transaction.txnclients import read_all, settle

STATE_TOPIC = "__transaction_state"
STATE_PARTITIONS = 5
TOPIC = "txn-failover"
PARTITIONS = 3


@pytest.fixture
def txn_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
                request: pytest.FixtureRequest) -> Any:
    yield from cluster_fixture(zookeeper, tmp_path, request, overrides={
        "transaction.state.log.num.partitions": STATE_PARTITIONS,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})


def state_partition(transactional_id: str) -> int:
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % STATE_PARTITIONS


def producer(cluster: Cluster, txn_id: str, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": ",".join(cluster.brokers[b].bootstrap
                                                   for b in cluster.live()),
                     "transactional.id": txn_id, "linger.ms": 5, **conf})


def test_coordinator_killed_mid_transaction(txn_cluster: Cluster) -> None:
    cluster = txn_cluster
    cluster.create_topic(TOPIC, PARTITIONS, configs={"min.insync.replicas": "2"})
    txn_id = f"failover-{uuid.uuid4().hex[:8]}"
    p = producer(cluster, txn_id)
    p.init_transactions(WAIT_S)
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(TOPIC, value=b"t1-%d" % part, partition=part)
    p.commit_transaction(WAIT_S)

    coordinator = cluster.leader(STATE_TOPIC, state_partition(txn_id))
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(TOPIC, value=b"t2-%d" % part, partition=part)
    assert p.flush(WAIT_S) == 0
    cluster.kill(coordinator)
    cluster.wait_leader_not(STATE_TOPIC, state_partition(txn_id), coordinator)
    try:
        p.commit_transaction(WAIT_S)
        committed = True
    except KafkaException as exc:
        if not exc.args[0].txn_requires_abort():
            raise
        p.abort_transaction(WAIT_S)
        committed = False

    live = ",".join(cluster.brokers[b].bootstrap for b in cluster.live())
    # the same producer carries on with the new coordinator
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(TOPIC, value=b"t3-%d" % part, partition=part)
    p.commit_transaction(WAIT_S)
    got = read_all(live, TOPIC, list(range(PARTITIONS)), "read_committed",
                   lambda got: sum(v.startswith(b"t3") for v in got) == PARTITIONS)
    t2 = sorted(v for v in got if v.startswith(b"t2"))
    assert t2 == ([b"t2-%d" % i for i in range(PARTITIONS)] if committed else []), (committed, got)
    assert sorted(v for v in got if v.startswith(b"t1")) == [b"t1-%d" % i
                                                             for i in range(PARTITIONS)]
    cluster.restart(coordinator)


def test_prepared_commit_is_completed_by_the_next_coordinator(txn_cluster: Cluster) -> None:
    """The coordinator dies right after answering EndTxn: its successor finds
    PrepareCommit in the log and writes the markers."""
    cluster = txn_cluster
    cluster.create_topic(TOPIC, PARTITIONS, configs={"min.insync.replicas": "2"})
    txn_id = f"prepared-{uuid.uuid4().hex[:8]}"
    p = producer(cluster, txn_id)
    p.init_transactions(WAIT_S)
    coordinator = cluster.leader(STATE_TOPIC, state_partition(txn_id))
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(TOPIC, value=b"prepared-%d" % part, partition=part)
    p.commit_transaction(WAIT_S)
    cluster.kill(coordinator)
    live = ",".join(cluster.brokers[b].bootstrap for b in cluster.live())
    got = read_all(live, TOPIC, list(range(PARTITIONS)), "read_committed",
                   lambda got: len(got) >= PARTITIONS)
    assert sorted(got) == [b"prepared-%d" % i for i in range(PARTITIONS)]
    # a new instance gets its epoch from the new coordinator once nothing is pending
    q = producer(cluster, txn_id)
    q.init_transactions(WAIT_S)
    q.begin_transaction()
    q.produce(TOPIC, value=b"after", partition=0)
    q.commit_transaction(WAIT_S)
    wait_for(lambda: b"after" in settle(live, TOPIC, [0], "read_committed"),
             what="the transaction after failover")
    cluster.restart(coordinator)
