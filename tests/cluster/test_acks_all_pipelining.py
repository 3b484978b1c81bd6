"""acks=all answers go out as soon as they are ready, even when the client has
pipelined more produce requests behind them on the same connection.

A connection handles one request at a time and holds produce answers back to
send several in one go once it has nothing more to read. An acks=all request that
then waits for its followers must first let those earlier answers go (as a
fetch does before its long poll); held, every earlier answer would wait for the
later request's replication too, up to its timeout."""

from __future__ import annotations

import time

from tests.cluster.cluster import WAIT_S, Cluster, wait_for
from tests.integration.rawclient import (
    API_PRODUCE,
    RawClient,
    Rec,
    build_batch,
    parse_produce_v3,
    produce_body_v3,
)

REQUEST_TIMED_OUT = 7
WAIT_MS = 3000


def test_ready_ack_is_not_held_behind_a_waiting_one(cluster: Cluster) -> None:
    cluster.create_topic("waits", 1, 3)
    leader = cluster.leader("waits", 0)
    # a single-replica partition on the same leader: its acks=all is ready at once
    cluster.create_topic("alone", 3, 1)
    alone = next(p for p in range(3) if cluster.leader("alone", p) == leader)
    follower = next(b for b in cluster.brokers if b != leader)

    with RawClient(cluster.brokers[leader].bootstrap, timeout=WAIT_S) as raw:
        cluster.pause(follower)  # shorter than its session: it stays in the ISR
        try:
            ready = raw.send(API_PRODUCE, 3, produce_body_v3(
                "alone", alone, build_batch([Rec(b"ready")]), acks=-1, timeout_ms=WAIT_MS))
            sent = time.monotonic()
            waiting = raw.send(API_PRODUCE, 3, produce_body_v3(
                "waits", 0, build_batch([Rec(b"waits")]), acks=-1, timeout_ms=WAIT_MS))
            corr, body = raw.recv()
            first_after = time.monotonic() - sent
            assert corr == ready
            assert parse_produce_v3(body)[0].error_code == 0
            corr, body = raw.recv()
            assert corr == waiting
            assert parse_produce_v3(body)[0].error_code == REQUEST_TIMED_OUT
        finally:
            cluster.resume(follower)
    assert first_after < WAIT_MS / 1000 / 2, (
        f"the ready acknowledgement came after {first_after:.2f}s, held behind the "
        f"request waiting {WAIT_MS} ms for its followers")
    wait_for(lambda: len(cluster.isr("waits", 0)) == 3, WAIT_S, "the follower back")
