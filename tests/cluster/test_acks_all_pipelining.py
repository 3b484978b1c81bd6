"""acks=all answers go out as soon as they are ready, even when the client has
pipelined more produce requests behind them on the same connection.

A connection holds produce answers back to send several in one go once it has
nothing more to read. An acks=all request that then waits for its followers must
first let those earlier answers go (as a fetch does before its long poll); held,
every earlier answer would wait for the later request's replication too, up to its
timeout.

An acks=all request waiting for its followers does not stop the connection: the
produce requests pipelined behind it are read and appended meanwhile, so one
replication round carries them all (issue 26: with five in flight a record waited
about five rounds, one after the other). Their answers still come in request order,
and any other request is answered only after every earlier one
(pybroker.server.deferred)."""

from __future__ import annotations

import time

from tests.cluster.cluster import WAIT_S, Cluster, wait_for
from tests.integration.rawclient import (
    API_PRODUCE,
    API_VERSIONS,
    RawClient,
    Rec,
    build_batch,
    parse_api_versions_v0,
    parse_produce_v3,
    produce_body_v3,
)

REQUEST_TIMED_OUT = 7
WAIT_MS = 3000
#: how long a follower may stay paused: well inside its ZooKeeper session (6 s), so it
#: stays in the ISR and the first request cannot be acknowledged meanwhile
PAUSED_S = 4.0


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


def test_pipelined_acks_all_requests_are_appended_while_the_first_waits(
        cluster: Cluster) -> None:
    cluster.create_topic("pipelined", 1, 3)
    leader = cluster.leader("pipelined", 0)
    follower = next(b for b in cluster.brokers if b != leader)

    with RawClient(cluster.brokers[leader].bootstrap, timeout=WAIT_S) as raw:
        cluster.pause(follower)  # shorter than its session: it stays in the ISR
        try:
            sent = [raw.send(API_PRODUCE, 3, produce_body_v3(
                "pipelined", 0, build_batch([Rec(f"pipelined-{i}".encode())]), acks=-1,
                timeout_ms=int(WAIT_S * 1000))) for i in range(3)]
            versions = raw.send(API_VERSIONS, 0, b"")
            # the first waits for the paused follower; the ones behind it are read
            # and appended meanwhile (before: not read until the first was answered)
            wait_for(lambda: b"pipelined-2" in cluster.log_bytes(leader, "pipelined", 0),
                     PAUSED_S, "the last pipelined request appended while the first waits")
        finally:
            cluster.resume(follower)
        # answers in request order, ApiVersions (read after them) last
        for corr in sent:
            got, body = raw.recv()
            assert got == corr
            [part] = parse_produce_v3(body)
            assert part.error_code == 0
        got, body = raw.recv()
        assert got == versions
        assert parse_api_versions_v0(body).error_code == 0
    # the records, in order, each once, on every replica
    records = cluster.read_partition("pipelined", 0)
    assert [value for _, value in records] == [f"pipelined-{i}".encode() for i in range(3)]


def test_pipelined_large_acks_all_requests(cluster: Cluster) -> None:
    """Requests too big for the read-ahead buffer (their own, growing buffer, reused
    for the next frame once the records are appended): each is appended whole."""
    cluster.create_topic("large", 1, 3, {"max.message.bytes": "4000000"})
    leader = cluster.leader("large", 0)
    values = [bytes([65 + i]) * size for i, size in enumerate(
        (200_000, 100_000, 3_000_000, 150_000))]
    with RawClient(cluster.brokers[leader].bootstrap, timeout=WAIT_S) as raw:
        sent = [raw.send(API_PRODUCE, 3, produce_body_v3(
            "large", 0, build_batch([Rec(value)]), acks=-1, timeout_ms=int(WAIT_S * 1000)))
            for value in values]
        for corr in sent:
            got, body = raw.recv()
            assert got == corr
            assert parse_produce_v3(body)[0].error_code == 0
    records = cluster.read_partition("large", 0)
    assert [value for _, value in records] == values
