"""Incremental fetch sessions (KIP-227) on the wire: full and incremental fetches,
epochs, forgotten partitions, the session errors, the cache bound, and a real
kafka-python consumer of 1,000 partitions whose fetch requests shrink."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from tests.conftest import free_port

from . import rawclient
from .helpers import create_topic, wait_topic
from .protoclient import ProtoClient
from .recording_proxy import RecordingProxy

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

FETCH = 1
V = 12  # the newest version naming topics by name (kafka-python's)
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
DEADLINE_S = 60.0
WIDE_TIMEOUT_S = 240.0


def fetch_body(topics: dict[str, list[tuple[int, int]]], session_id: int, epoch: int,
               forgotten: dict[str, list[int]] | None = None,
               max_wait_ms: int = 0) -> dict[str, Any]:
    return {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic": t, "partitions": [
            {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20}
            for p, o in parts]} for t, parts in topics.items()],
        "forgotten_topics_data": [{"topic": t, "partitions": ps}
                                  for t, ps in (forgotten or {}).items()],
        "rack_id": "",
    }


def answered(response: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(t["topic"], p["partition_index"]): p
            for t in response["responses"] for p in t["partitions"]}


def produce_one(broker: Broker, topic: str, partition: int) -> None:
    with rawclient.RawClient(broker.bootstrap) as rc:
        assert rc.produce(topic, partition, rawclient.build_batch(
            [rawclient.Rec(b"x")]), acks=1).error_code == 0


def test_incremental_fetch_answers_only_what_changed(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    with ProtoClient(broker.bootstrap) as pc:
        full = pc.request(FETCH, V, fetch_body({topic_name: [(0, 0), (1, 0), (2, 0)]}, 0, 0))
        assert full["error_code"] == 0
        session = full["session_id"]
        assert session > 0
        assert set(answered(full)) == {(topic_name, i) for i in range(3)}

        # nothing changed: an incremental fetch naming nothing gets nothing back
        quiet = pc.request(FETCH, V, fetch_body({}, session, 1))
        assert (quiet["error_code"], quiet["session_id"]) == (0, session)
        assert quiet["responses"] == []

        # partition 1 grows: only it comes back, with its records
        produce_one(broker, topic_name, 1)
        grown = pc.request(FETCH, V, fetch_body({}, session, 2))
        parts = answered(grown)
        assert list(parts) == [(topic_name, 1)]
        assert parts[(topic_name, 1)]["high_watermark"] == 1
        assert len(parts[(topic_name, 1)]["records"]) > 0

        # the fetcher moves its offset past the record: the session remembers it
        moved = pc.request(FETCH, V, fetch_body({topic_name: [(1, 1)]}, session, 3))
        assert moved["responses"] == []
        again = pc.request(FETCH, V, fetch_body({}, session, 4))
        assert again["responses"] == []


def test_forgotten_partitions_leave_the_session(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    with ProtoClient(broker.bootstrap) as pc:
        full = pc.request(FETCH, V, fetch_body({topic_name: [(0, 0), (1, 0)]}, 0, 0))
        session = full["session_id"]
        forgot = pc.request(FETCH, V, fetch_body({}, session, 1, forgotten={topic_name: [0]}))
        assert forgot["error_code"] == 0
        produce_one(broker, topic_name, 0)
        produce_one(broker, topic_name, 1)
        # partition 0 is no longer fetched, partition 1 is
        after = pc.request(FETCH, V, fetch_body({}, session, 2))
        assert list(answered(after)) == [(topic_name, 1)]
        # forgetting the last partition closes the session
        last = pc.request(FETCH, V, fetch_body({}, session, 3, forgotten={topic_name: [1]}))
        assert (last["error_code"], last["session_id"]) == (0, 0)
        gone = pc.request(FETCH, V, fetch_body({}, session, 4))
        assert gone["error_code"] == FETCH_SESSION_ID_NOT_FOUND


def test_session_errors(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with ProtoClient(broker.bootstrap) as pc:
        unknown = pc.request(FETCH, V, fetch_body({topic_name: [(0, 0)]}, 0x1234567, 1))
        assert (unknown["error_code"], unknown["session_id"]) == (FETCH_SESSION_ID_NOT_FOUND, 0)
        assert unknown["responses"] == []

        session = pc.request(FETCH, V, fetch_body({topic_name: [(0, 0)]}, 0, 0))["session_id"]
        for bad_epoch in (2, 7, 0x7FFFFFFF):
            wrong = pc.request(FETCH, V, fetch_body({}, session, bad_epoch))
            assert wrong["error_code"] == INVALID_FETCH_SESSION_EPOCH, bad_epoch
            assert wrong["responses"] == []
        # a wrong epoch leaves the session as it was: epoch 1 still works, once
        assert pc.request(FETCH, V, fetch_body({}, session, 1))["error_code"] == 0
        replay = pc.request(FETCH, V, fetch_body({}, session, 1))
        assert replay["error_code"] == INVALID_FETCH_SESSION_EPOCH

        # epoch -1 (FINAL) closes the session and is answered as a sessionless fetch
        final = pc.request(FETCH, V, fetch_body({topic_name: [(0, 0)]}, session, -1))
        assert (final["error_code"], final["session_id"]) == (0, 0)
        assert list(answered(final)) == [(topic_name, 0)]
        closed = pc.request(FETCH, V, fetch_body({}, session, 2))
        assert closed["error_code"] == FETCH_SESSION_ID_NOT_FOUND

        # a full fetch naming a session replaces it with a new one
        first = pc.request(FETCH, V, fetch_body({topic_name: [(0, 0)]}, 0, 0))["session_id"]
        second = pc.request(FETCH, V, fetch_body({topic_name: [(0, 0)]}, first, 0))["session_id"]
        assert second not in (0, first)
        assert pc.request(FETCH, V, fetch_body({}, first, 1))["error_code"] == \
            FETCH_SESSION_ID_NOT_FOUND
        assert pc.request(FETCH, V, fetch_body({}, second, 1))["error_code"] == 0

    # the broker is still up and serving
    with rawclient.RawClient(broker.bootstrap) as rc:
        assert rc.fetch(topic_name, 0, 0, max_wait_ms=0).error_code == 0


def test_cache_slots_bound_the_sessions(broker_factory: BrokerFactory) -> None:
    b = broker_factory({"max.incremental.fetch.session.cache.slots": 1})
    create_topic(b.bootstrap, "slots", partitions=2)
    with ProtoClient(b.bootstrap) as pc:
        first = pc.request(FETCH, V, fetch_body({"slots": [(0, 0)]}, 0, 0))
        assert first["session_id"] > 0
        # the cache is full and the first session is young: no session for a newcomer,
        # which is still answered in full
        second = pc.request(FETCH, V, fetch_body({"slots": [(0, 0), (1, 0)]}, 0, 0))
        assert (second["error_code"], second["session_id"]) == (0, 0)
        assert len(answered(second)) == 2
        assert pc.request(FETCH, V, fetch_body({}, first["session_id"], 1))["error_code"] == 0

    none = broker_factory({"max.incremental.fetch.session.cache.slots": 0})
    create_topic(none.bootstrap, "slots", partitions=1)
    with ProtoClient(none.bootstrap) as pc:
        assert pc.request(FETCH, V, fetch_body({"slots": [(0, 0)]}, 0, 0))["session_id"] == 0


def test_consumer_of_1000_partitions_sends_incremental_fetches(
        broker_factory: BrokerFactory) -> None:
    """kafka-python keeps a fetch session: after the first (full) fetch, its fetch
    requests name only the partitions whose position moved, so they are a small
    fraction of the full request's size."""
    port = free_port()
    proxy = RecordingProxy(port).start()
    try:
        b = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}"})
        proxy.target = ("127.0.0.1", b.port)
        topic = "wide"
        # 1,000 partitions take a while to set up on a loaded 2-core box
        client = AdminClient({"bootstrap.servers": b.bootstrap,
                              "socket.timeout.ms": int(WIDE_TIMEOUT_S * 1000)})
        client.create_topics([NewTopic(topic, num_partitions=1000, replication_factor=1)],
                             operation_timeout=WIDE_TIMEOUT_S,
                             request_timeout=WIDE_TIMEOUT_S)[topic].result(WIDE_TIMEOUT_S)
        wait_topic(b.bootstrap, topic, 1000, timeout=WIDE_TIMEOUT_S)
        consumer = KafkaConsumer(bootstrap_servers=proxy.bootstrap, enable_auto_commit=False,
                                 fetch_max_wait_ms=100)
        try:
            consumer.assign([TopicPartition(topic, i) for i in range(1000)])
            consumer.seek_to_beginning()
            deadline = time.monotonic() + DEADLINE_S
            produced = False
            got = 0
            while time.monotonic() < deadline:
                fetches = [r for r in proxy.snapshot() if r[0] == FETCH]
                if len(fetches) >= 5 and not produced:
                    produce_one(b, topic, 7)
                    produced = True
                got += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
                if produced and got and len(fetches) >= 12:
                    break
            fetches = [r for r in proxy.snapshot() if r[0] == FETCH]
        finally:
            consumer.close()
        assert got == 1, "the record produced mid-session was not consumed"
        assert len(fetches) >= 12, fetches
        versions = {v for _, v, _ in fetches}
        assert min(versions) >= 7, versions
        full = fetches[0][2]
        later = [size for _, _, size in fetches[1:]]
        # 1,000 partitions take > 16 KB to name; an incremental fetch names a few
        assert full > 16_000, full
        assert max(later) < full // 20, (full, later)
    finally:
        proxy.close()


@pytest.mark.parametrize("epoch", [1, 5])
def test_incremental_fetch_of_a_session_from_another_connection(
        broker: Broker, topic_name: str, epoch: int) -> None:
    """Sessions belong to the broker, not to a connection (a client may reconnect)."""
    create_topic(broker.bootstrap, topic_name)
    with ProtoClient(broker.bootstrap) as pc:
        session = pc.request(FETCH, V, fetch_body({topic_name: [(0, 0)]}, 0, 0))["session_id"]
        for e in range(1, epoch):
            assert pc.request(FETCH, V, fetch_body({}, session, e))["error_code"] == 0
    with ProtoClient(broker.bootstrap) as other:
        reply = other.request(FETCH, V, fetch_body({}, session, epoch))
        assert (reply["error_code"], reply["session_id"]) == (0, session)


def test_incremental_long_poll_wakes_on_an_unread_partition(broker: Broker,
                                                            topic_name: str) -> None:
    """Caught-up partitions are left unread by an incremental fetch, but it still waits on
    them: a record arriving mid-wait answers the fetch long before max_wait_ms."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    with ProtoClient(broker.bootstrap) as pc:
        session = pc.request(FETCH, V, fetch_body({topic_name: [(0, 0), (1, 0)]}, 0, 0))[
            "session_id"]
        timer = threading.Timer(0.5, produce_one, (broker, topic_name, 1))
        timer.start()
        try:
            started = time.monotonic()
            woken = pc.request(FETCH, V, fetch_body({}, session, 1, max_wait_ms=10_000))
            elapsed = time.monotonic() - started
        finally:
            timer.join()
        assert list(answered(woken)) == [(topic_name, 1)]
        assert elapsed < 8.0, elapsed
