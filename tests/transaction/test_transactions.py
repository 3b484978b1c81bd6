"""Transactions with real clients against one broker: commit and abort as
read_committed and read_uncommitted readers see them, an open transaction
holding read_committed readers back, the coordinator aborting a transaction
past its timeout, zombie fencing, transaction timeout limits, offsets sent to
a transaction, and kafka-python's and aiokafka's transactional producers."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.integration.helpers import create_topic
from tests.transaction.txnclients import read_all, settle, txn_producer, wait_for

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory


def test_commit_and_abort_as_each_isolation_level_sees_them(broker: Broker,
                                                            topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    p = txn_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic_name, value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic_name, value=b"aborted%d" % i, partition=i % 2)
    p.flush(30)  # on the broker before the abort (librdkafka purges unsent ones)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"last", partition=0)
    p.produce(topic_name, value=b"last", partition=1)
    p.commit_transaction(30)

    committed = read_all(broker.bootstrap, topic_name, [0, 1], "read_committed",
                         lambda got: got.count(b"last") == 2)
    assert sorted(committed) == sorted([b"c0", b"c1", b"c2", b"c3", b"last", b"last"])
    uncommitted = read_all(broker.bootstrap, topic_name, [0, 1], "read_uncommitted",
                           lambda got: got.count(b"last") == 2)
    assert sorted(v for v in uncommitted if v.startswith(b"aborted")) == [
        b"aborted0", b"aborted1", b"aborted2"]


def test_open_transaction_holds_read_committed_readers_back(broker: Broker,
                                                            topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    plain = txn_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
    plain.init_transactions(30)
    plain.begin_transaction()
    plain.produce(topic_name, value=b"before", partition=0)
    plain.commit_transaction(30)
    p = txn_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"open", partition=0)
    p.flush(30)
    plain.begin_transaction()
    plain.produce(topic_name, value=b"after", partition=0)
    plain.commit_transaction(30)
    # the committed "after" is behind the open transaction: not readable yet
    assert settle(broker.bootstrap, topic_name, [0], "read_committed") == [b"before"]
    assert b"after" in settle(broker.bootstrap, topic_name, [0], "read_uncommitted")
    p.commit_transaction(30)
    got = read_all(broker.bootstrap, topic_name, [0], "read_committed",
                   lambda got: b"after" in got)
    assert got == [b"before", b"open", b"after"]


def test_transaction_past_its_timeout_is_aborted(broker_factory: BrokerFactory) -> None:
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200})
    create_topic(b.bootstrap, "timeouts", partitions=1)
    p = txn_producer(b.bootstrap, "slow", **{"transaction.timeout.ms": 3000,
                                           "socket.timeout.ms": 3000,
                                           "message.timeout.ms": 3000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("timeouts", value=b"never", partition=0)
    p.flush(30)
    other = txn_producer(b.bootstrap, "quick")
    other.init_transactions(30)
    other.begin_transaction()
    other.produce("timeouts", value=b"visible", partition=0)
    other.commit_transaction(30)
    # the coordinator aborts "slow" after 3 s: the LSO moves past it
    got = read_all(b.bootstrap, "timeouts", [0], "read_committed",
                   lambda got: b"visible" in got)
    assert got == [b"visible"]
    # the producer learns it when it tries to commit (its epoch was bumped)
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_second_producer_fences_the_first(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    txn_id = f"zombie-{uuid.uuid4().hex[:8]}"
    first = txn_producer(broker.bootstrap, txn_id)
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic_name, value=b"zombie", partition=0)
    first.flush(30)
    second = txn_producer(broker.bootstrap, txn_id)
    second.init_transactions(30)  # fences first and aborts its transaction
    second.begin_transaction()
    second.produce(topic_name, value=b"winner", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as caught:
        first.produce(topic_name, value=b"late", partition=0)
        first.commit_transaction(10)
    error = caught.value.args[0]
    assert error.fatal(), error
    got = read_all(broker.bootstrap, topic_name, [0], "read_committed",
                   lambda got: b"winner" in got)
    assert got == [b"winner"]


def test_timeout_above_the_maximum_is_refused(broker_factory: BrokerFactory) -> None:
    b = broker_factory({"transaction.max.timeout.ms": 5000})
    p = txn_producer(b.bootstrap, "too-long", **{"transaction.timeout.ms": 60000})
    with pytest.raises(KafkaException) as caught:
        p.init_transactions(15)
    assert caught.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_offsets_sent_to_a_transaction_are_committed_with_it(broker: Broker,
                                                             topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        p = txn_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic_name, value=b"x", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 42)],
                                      consumer.consumer_group_metadata(), 30)
        p.abort_transaction(30)

        def committed() -> int:
            [tp] = consumer.committed([TopicPartition(topic_name, 0)], timeout=10)
            return tp.offset

        assert committed() < 0  # aborted: nothing committed
        p.begin_transaction()
        p.produce(topic_name, value=b"y", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 7)],
                                      consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert wait_for(lambda: committed() == 7, what="the committed offset")
    finally:
        consumer.close()


def test_kafka_python_transactional_producer(broker: Broker, topic_name: str) -> None:
    from kafka import KafkaProducer

    create_topic(broker.bootstrap, topic_name, partitions=1)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap,
                      transactional_id=f"kp-{uuid.uuid4().hex[:8]}")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic_name, b"kp-aborted", partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic_name, b"kp-committed", partition=0)
        p.commit_transaction()
    finally:
        p.close(timeout=10)
    assert read_all(broker.bootstrap, topic_name, [0], "read_committed",
                    lambda got: b"kp-committed" in got) == [b"kp-committed"]
    assert read_all(broker.bootstrap, topic_name, [0], "read_uncommitted",
                    lambda got: b"kp-committed" in got) == [b"kp-aborted", b"kp-committed"]


def test_aiokafka_transactional_producer(broker: Broker, topic_name: str) -> None:
    from aiokafka import AIOKafkaProducer

    create_topic(broker.bootstrap, topic_name, partitions=1)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                             transactional_id=f"aio-{uuid.uuid4().hex[:8]}")
        await p.start()
        try:
            await p.begin_transaction()
            await p.send_and_wait(topic_name, b"aio-aborted", partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait(topic_name, b"aio-committed", partition=0)
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), 60))
    assert read_all(broker.bootstrap, topic_name, [0], "read_committed",
                    lambda got: b"aio-committed" in got) == [b"aio-committed"]
    assert read_all(broker.bootstrap, topic_name, [0], "read_uncommitted",
                    lambda got: b"aio-committed" in got) == [b"aio-aborted", b"aio-committed"]


def offset_fetch_v7(bootstrap: str, group: str, topic: str, require_stable: bool
                    ) -> tuple[int, int]:
    """(error code, offset) of partition 0 from OffsetFetch v7."""
    import anyio

    from pybroker.client.connection import BrokerConnection

    host, _, port = bootstrap.rpartition(":")

    async def ask() -> tuple[int, int]:
        connection = BrokerConnection(host, int(port), "txn-test", 10.0)
        try:
            answer = await connection.request(9, 7, {
                "group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
                "require_stable": require_stable})
        finally:
            await connection.close()
        [part] = answer["topics"][0]["partitions"]
        return part["error_code"], part["committed_offset"]

    return anyio.run(ask)


def test_require_stable_offset_fetch_waits_for_the_marker(broker: Broker,
                                                          topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        p = txn_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic_name, value=b"x", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 5)],
                                      consumer.consumer_group_metadata(), 30)
        unstable = 88
        assert offset_fetch_v7(broker.bootstrap, group, topic_name, True)[0] == unstable
        assert offset_fetch_v7(broker.bootstrap, group, topic_name, False) == (0, -1)
        p.commit_transaction(30)
        assert wait_for(lambda: offset_fetch_v7(broker.bootstrap, group, topic_name, True)
                        == (0, 5), what="the stable offset")
    finally:
        consumer.close()


def test_offsets_of_a_subscribed_member_carry_its_generation(broker: Broker,
                                                              topic_name: str) -> None:
    """send_offsets_to_transaction with a group member's metadata: TxnOffsetCommit v3
    carries its generation and member id, which the group coordinator checks."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    source = txn_producer(broker.bootstrap, f"src-{uuid.uuid4().hex[:8]}")
    source.init_transactions(30)
    source.begin_transaction()
    source.produce(topic_name, value=b"in", partition=0)
    source.commit_transaction(30)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic_name])
        msg = wait_for(lambda: (m := consumer.poll(0.5)) is not None and m.error() is None
                       and m, what="the record as a group member")
        p = txn_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
        p.init_transactions(30)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic_name, 0, msg.offset() + 1)],
                                      consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert wait_for(lambda: consumer.committed([TopicPartition(topic_name, 0)],
                                                   timeout=10)[0].offset == msg.offset() + 1,
                        what="the member's committed offset")
    finally:
        consumer.close()
