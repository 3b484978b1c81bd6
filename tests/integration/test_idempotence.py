"""Idempotent producers end to end (PROTOCOL.md gotcha 8): a resent batch gets its
original offset back and is stored once, a gap gets OUT_OF_ORDER_SEQUENCE_NUMBER (45),
a stale epoch INVALID_PRODUCER_EPOCH (47), and the state survives restarts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.record.default_records import DefaultRecordBatchBuilder

from .helpers import assert_delivered, consume_confluent, create_topic, produce_all, producer
from .rawclient import RawClient

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


def idempotent_batch(pid: int, epoch: int, seq: int, n: int = 3, tag: str = "r") -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20,
    )
    for i in range(n):
        assert b.append(i, timestamp=1_700_000_000_000, key=None,
                        value=f"{tag}{seq + i}".encode(), headers=[]) is not None
    return bytes(b.build())


def test_confluent_idempotent_producer_then_raw_resend(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    p = producer(broker.bootstrap, enable_idempotence=True, linger_ms=5)
    reports = produce_all(p, topic_name, [{"value": f"c{i}".encode()} for i in range(20)])
    assert_delivered(reports)
    with RawClient(broker.bootstrap) as c:
        first = c.produce(topic_name, 0, idempotent_batch(900_001, 0, 0))
        assert (first.error_code, first.base_offset) == (0, 20)
        again = c.produce(topic_name, 0, idempotent_batch(900_001, 0, 0))
        assert (again.error_code, again.base_offset) == (0, 20)
        assert c.high_watermark(topic_name) == 23
        gap = c.produce(topic_name, 0, idempotent_batch(900_001, 0, 7))
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        stale = c.produce(topic_name, 0, idempotent_batch(900_001, -1, 3))
        assert stale.error_code == INVALID_PRODUCER_EPOCH
        nxt = c.produce(topic_name, 0, idempotent_batch(900_001, 0, 3))
        assert (nxt.error_code, nxt.base_offset) == (0, 23)
    got = consume_confluent(broker.bootstrap, topic_name, 26)
    values = [g.value for g in got]
    assert values[:20] == [f"c{i}".encode() for i in range(20)]
    assert values[20:] == [f"r{i}".encode() for i in range(6)]


def test_duplicate_detected_after_restart(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    with RawClient(b.bootstrap) as c:
        for seq in range(0, 12, 3):
            assert c.produce(topic_name, 0, idempotent_batch(77, 1, seq)).error_code == 0
    for restart in (b.restart, b.kill):
        restart()
        if not b.running:
            b.start()
        with RawClient(b.bootstrap) as c:
            again = c.produce(topic_name, 0, idempotent_batch(77, 1, 9))
            assert (again.error_code, again.base_offset) == (0, 9)
            assert c.produce(topic_name, 0,
                             idempotent_batch(77, 1, 13)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
            assert c.high_watermark(topic_name) == 12
