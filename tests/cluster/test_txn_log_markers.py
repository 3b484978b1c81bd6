"""Transaction markers on a 3-broker cluster (RF 3): a marker written by the leader
is answered once the ISR has it, the followers build the same `.txnindex`, and after
the leader is killed the new leader serves read_committed correctly — the LSO
still held by the open transaction, the aborted one reported and skipped — and
takes the marker that ends the open one."""

from __future__ import annotations

from tests.cluster.cluster import Cluster, wait_for
from tests.cluster.scenario import FAILOVER_S, TOPIC_CONFIGS
from tests.integration.helpers import consume_confluent
from tests.integration.rawclient import RawClient
from tests.transaction.txnraw import (
    READ_COMMITTED,
    fetch,
    init_producer_id,
    list_latest,
    record_offsets,
    txn_batch,
    write_markers,
)

NOT_LEADER_OR_FOLLOWER = 6


def txnindex_files(cluster: Cluster, broker_id: int, topic: str) -> dict[str, bytes]:
    directory = cluster.brokers[broker_id].data_dir / f"{topic}-0"
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.txnindex"))}


def test_markers_replicate_and_a_new_leader_serves_read_committed(cluster: Cluster) -> None:
    topic = "txn-markers"
    cluster.create_topic(topic, 1, configs=TOPIC_CONFIGS)
    leader = cluster.leader(topic, 0)
    follower = next(b for b in cluster.brokers if b != leader)
    tp = [(topic, 0)]
    with RawClient(cluster.brokers[leader].bootstrap) as c:
        a, a_epoch = init_producer_id(c)
        o, o_epoch = init_producer_id(c)
        assert c.produce(topic, 0, txn_batch(a, a_epoch, 0, ["a0", "a1"])).error_code == 0  # 0-1
        assert c.produce(topic, 0, txn_batch(o, o_epoch, 0, ["o0"])).error_code == 0  # 2
        assert c.produce(topic, 0, txn_batch(-1, -1, -1, ["plain"], False)).error_code == 0
        assert write_markers(c, a, a_epoch, False, tp, coordinator_epoch=1) == {tp[0]: 0}  # 4
        assert list_latest(c, topic, READ_COMMITTED) == 2
    with RawClient(cluster.brokers[follower].bootstrap) as c:
        assert write_markers(c, o, o_epoch, True, tp) == {tp[0]: NOT_LEADER_OR_FOLLOWER}

    # answered once the ISR had it: every replica indexed the abort alike
    expected = txnindex_files(cluster, leader, topic)
    assert list(expected.values()) and len(b"".join(expected.values())) == 34
    for broker_id in cluster.brokers:
        assert wait_for(lambda b=broker_id: txnindex_files(cluster, b, topic) == expected,
                        what=f"broker {broker_id}'s .txnindex")

    cluster.kill(leader)
    new_leader = cluster.wait_leader_not(topic, 0, leader, FAILOVER_S)
    with RawClient(cluster.brokers[new_leader].bootstrap) as c:
        def served() -> bool:
            try:
                return list_latest(c, topic, READ_COMMITTED) == 2
            except AssertionError:
                return False  # not leader yet in this broker's view
        wait_for(served, what="the new leader's read_committed LSO")
        f = fetch(c, topic, 0)
        assert (f.high_watermark, f.last_stable_offset) == (5, 2)
        assert f.aborted == [(a, 0)]
        assert record_offsets(f.records) == [0, 1]
        assert write_markers(c, o, o_epoch, True, tp, coordinator_epoch=1) == {tp[0]: 0}  # 5
        assert list_latest(c, topic, READ_COMMITTED) == 6
        f = fetch(c, topic, 0)
        assert (f.last_stable_offset, f.aborted) == (6, [(a, 0)])
    got = consume_confluent(cluster.bootstrap, topic, 2, **{"isolation.level": "read_committed"})
    assert [(g.offset, g.value) for g in got] == [(2, b"o0"), (3, b"plain")]
