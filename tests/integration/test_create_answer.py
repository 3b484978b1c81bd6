"""CreateTopics is answered as Kafka 4.0 answers it (issue 25): once the topic is
written, not once its logs are open and its leaders up; Metadata shows a partition's
leader only once that leader serves it; a timeout of 0 or less creates nothing and
answers REQUEST_TIMED_OUT (Kafka 4.0's controller drops a request past its deadline)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from pybroker.client.connection import BrokerConnection
from pybroker.errors import ErrorCode

from .rawclient import Rec, build_batch

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

CREATE_TOPICS, METADATA, PRODUCE = 19, 3, 0
WAIT_S = 120.0
PARTITIONS = 600


def connect(broker: Broker) -> BrokerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), "create-answer-test", 60)


async def create(conn: BrokerConnection, name: str, partitions: int, timeout_ms: int,
                 validate_only: bool = False) -> dict[str, Any]:
    response = await conn.request(CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": timeout_ms, "validate_only": validate_only})
    return response["topics"][0]


async def metadata(conn: BrokerConnection, name: str) -> dict[str, Any]:
    response = await conn.request(METADATA, 9, {
        "topics": [{"name": name}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    return response["topics"][0]


def test_the_answer_comes_before_the_logs_and_the_topic_then_becomes_usable(
        broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    name = "made-fast"

    async def main() -> None:
        conn = connect(broker)
        answer = await create(conn, name, PARTITIONS, 30000)
        dirs_at_answer = len(list(broker.data_dir.glob(f"{name}-*")))
        assert answer["error_code"] == ErrorCode.NONE
        assert answer["num_partitions"] == PARTITIONS and answer["replication_factor"] == 1
        assert answer["topic_id"].int != 0
        assert any(c["name"] == "retention.ms" for c in answer["configs"])
        # answered once written: this broker had not opened the topic's logs yet
        assert dirs_at_answer < PARTITIONS

        # until a partition's leader serves it, Metadata says LEADER_NOT_AVAILABLE (or
        # does not know the topic yet); once every partition shows a leader, each one
        # takes a produce at once, with no retry
        deadline = time.monotonic() + WAIT_S
        codes: set[int] = set()
        while True:
            topic = await metadata(conn, name)
            codes.add(topic["error_code"])
            codes.update(p["error_code"] for p in topic["partitions"])
            if (topic["error_code"] == ErrorCode.NONE and len(topic["partitions"]) == PARTITIONS
                    and all(p["leader_id"] == 0 for p in topic["partitions"])):
                break
            assert time.monotonic() < deadline, f"not led after {WAIT_S} s: {codes}"
            await anyio.sleep(0.02)
        assert codes <= {ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE,
                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        batch = build_batch([Rec(value=b"v")])
        produced = await conn.request(PRODUCE, 7, {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": name, "partition_data": [
                {"index": i, "records": batch} for i in range(PARTITIONS)]}]})
        errors = {p["index"]: p["error_code"]
                  for p in produced["responses"][0]["partition_responses"]
                  if p["error_code"] != ErrorCode.NONE}
        assert errors == {}
        assert len(list(broker.data_dir.glob(f"{name}-*"))) == PARTITIONS
        await conn.close()

    anyio.run(main)


def test_a_timeout_of_zero_or_less_creates_nothing(broker: Broker) -> None:
    async def main() -> None:
        conn = connect(broker)
        for timeout_ms in (0, -1):
            for validate_only in (False, True):
                name = f"not-made-{-timeout_ms}-{int(validate_only)}"
                answer = await create(conn, name, 3, timeout_ms, validate_only)
                assert answer["error_code"] == ErrorCode.REQUEST_TIMED_OUT
                assert answer["num_partitions"] == -1
        # nothing was created (a timeout of 1 ms is time enough, as in Kafka 4.0)
        assert (await create(conn, "made-in-1ms", 3, 1))["error_code"] == ErrorCode.NONE
        for name in ("not-made-0-0", "not-made-1-0"):
            assert (await metadata(conn, name))["error_code"] == \
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert (await create(conn, name, 3, 30000))["error_code"] == ErrorCode.NONE
        await conn.close()

    anyio.run(main)


CREATE_PARTITIONS, DELETE_TOPICS = 37, 20


async def grow(conn: BrokerConnection, name: str, count: int, timeout_ms: int,
               validate_only: bool = False) -> dict[str, Any]:
    response = await conn.request(CREATE_PARTITIONS, 1, {
        "topics": [{"name": name, "count": count, "assignments": None}],
        "timeout_ms": timeout_ms, "validate_only": validate_only})
    return response["results"][0]


async def delete(conn: BrokerConnection, name: str, timeout_ms: int) -> dict[str, Any]:
    response = await conn.request(DELETE_TOPICS, 5, {"topic_names": [name],
                                                     "timeout_ms": timeout_ms})
    return response["responses"][0]


async def wait_led(conn: BrokerConnection, name: str, partitions: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        topic = await metadata(conn, name)
        if (topic["error_code"] == ErrorCode.NONE and len(topic["partitions"]) == partitions
                and all(p["leader_id"] == 0 for p in topic["partitions"])):
            return
        assert time.monotonic() < deadline, f"{name} not led after {WAIT_S} s"
        await anyio.sleep(0.02)


def test_create_partitions_answers_once_written_and_delete_topics_once_removed(
        broker_factory: BrokerFactory) -> None:
    """Kafka 4.0 answers both at the controller's commit (ControllerApis): new
    partitions are not led yet, a deleted topic's logs are not gone yet. The answers
    come before that work, and what was answered holds: the new partitions take
    produces once led, the deleted name can be created again at once."""
    broker = broker_factory()
    name = "grown-fast"

    async def main() -> None:
        conn = connect(broker)
        assert (await create(conn, name, 1, 30000))["error_code"] == ErrorCode.NONE
        await wait_led(conn, name, 1)
        answer = await grow(conn, name, 1 + PARTITIONS, 30000)
        dirs_at_answer = len(list(broker.data_dir.glob(f"{name}-*")))
        assert answer["error_code"] == ErrorCode.NONE
        # answered once written: this broker had not opened the new logs yet
        assert dirs_at_answer < 1 + PARTITIONS
        topic = await metadata(conn, name)
        assert len(topic["partitions"]) == 1 + PARTITIONS
        await wait_led(conn, name, 1 + PARTITIONS)
        batch = build_batch([Rec(value=b"v")])
        produced = await conn.request(PRODUCE, 7, {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": name, "partition_data": [
                {"index": i, "records": batch} for i in range(1 + PARTITIONS)]}]})
        assert all(p["error_code"] == ErrorCode.NONE
                   for p in produced["responses"][0]["partition_responses"])

        assert (await delete(conn, name, 30000))["error_code"] == ErrorCode.NONE
        assert (await metadata(conn, name))["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # the name is free at once, and the new topic has none of the old records
        assert (await create(conn, name, 1, 30000))["error_code"] == ErrorCode.NONE
        await wait_led(conn, name, 1)
        offsets = await conn.request(2, 1, {"replica_id": -1, "topics": [
            {"name": name, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert offsets["topics"][0]["partitions"][0]["offset"] == 0
        # and the old logs go, in the background
        deadline = time.monotonic() + WAIT_S
        while [d for d in broker.data_dir.iterdir() if d.name.endswith("-delete")]:
            assert time.monotonic() < deadline, "the deleted logs were not removed"
            await anyio.sleep(0.1)
        await conn.close()

    anyio.run(main)


def test_grow_and_delete_with_a_timeout_of_zero_or_less_change_nothing(
        broker_factory: BrokerFactory) -> None:
    """Kafka 4.0's controller drops a request whose deadline has passed before it gets
    to it: REQUEST_TIMED_OUT, and the topic keeps its partitions and is not deleted."""
    broker = broker_factory()

    async def main() -> None:
        conn = connect(broker)
        kept, other = "a-kept", "b-deleted"
        for name in (kept, other):
            assert (await create(conn, name, 2, 30000))["error_code"] == ErrorCode.NONE
            await wait_led(conn, name, 2)
        for timeout_ms in (0, -1):
            for validate_only in (False, True):
                answer = await grow(conn, kept, 4, timeout_ms, validate_only)
                assert answer["error_code"] == ErrorCode.REQUEST_TIMED_OUT
            assert (await delete(conn, kept, timeout_ms))["error_code"] == \
                ErrorCode.REQUEST_TIMED_OUT
        # a deletion of another topic, answered: the controller deletes marked topics in
        # name order, so had `kept` been marked, it would be gone by now
        assert (await delete(conn, other, 30000))["error_code"] == ErrorCode.NONE
        topic = await metadata(conn, kept)
        assert topic["error_code"] == ErrorCode.NONE and len(topic["partitions"]) == 2
        # a timeout of 1 ms is time enough to be written
        assert (await grow(conn, kept, 3, 1))["error_code"] == ErrorCode.NONE
        await conn.close()

    anyio.run(main)
