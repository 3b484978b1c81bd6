"""pybroker.spark's transactional client (no Spark): a task's transaction against a
real broker, fencing of an older attempt, and committed-only marker reads."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from pybroker._core import build_batch
from pybroker.errors import ErrorCode
from pybroker.spark.client import KafkaClient, KafkaError
from pybroker.spark.txn import TaskTransaction, end_all, read_marker_records
from tests.integration.helpers import create_topic

pytestmark = pytest.mark.timeout(120)


def batch(*values: bytes) -> bytes:
    return build_batch([b"k" + v for v in values], list(values), 0)


def read_committed(bootstrap: str, topic: str, until: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    for _ in range(40):
        for m in c.consume(100, 0.25):
            if m.error() is None:
                got.append(m.value())
        if len(got) >= until:
            break
    c.close()
    return got


def test_commit_abort_open_and_fencing(broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    tp = (topic_name, 0)
    txn_id = f"spark-{uuid.uuid4().hex[:8]}"
    with KafkaClient(broker.bootstrap) as c:
        t = TaskTransaction.begin(c, txn_id, 60000)
        t.produce({tp: [batch(b"a1", b"a2"), batch(b"a3")]})
        end_all(c, [t.handle], commit=True)
        t = TaskTransaction.begin(c, txn_id, 60000)
        t.produce({tp: [batch(b"aborted")]})
        end_all(c, [t.handle], commit=False)
        # a zombie: a later attempt's InitProducerId fences it and aborts its records
        zombie = TaskTransaction.begin(c, txn_id, 60000)
        zombie.produce({tp: [batch(b"zombie")]})
        t = TaskTransaction.begin(c, txn_id, 60000)
        with pytest.raises(KafkaError) as err:
            end_all(c, [zombie.handle], commit=True)
        assert err.value.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
        t.produce({tp: [batch(b"b1")]})
        end_all(c, [t.handle], commit=True)
        # still open at the end: not committed, so not read
        t2 = TaskTransaction.begin(c, txn_id + "-2", 60000)
        t2.produce({tp: [batch(b"open")]})
        assert [v for _, v in read_marker_records(c, tp)] == [b"a1", b"a2", b"a3"] or \
            [v for _, v in read_marker_records(c, tp)] == [b"a1", b"a2", b"a3", b"b1"]
        end_all(c, [t2.handle], commit=True)
        # EndTxn answers once the commit is decided; the coordinator writes the
        # COMMIT marker right after
        deadline = time.monotonic() + 30
        while read_marker_records(c, tp)[-1][1] != b"open" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [v for _, v in read_marker_records(c, tp)][-1] == b"open"
        # InitProducerId waits for that (CONCURRENT_TRANSACTIONS, retried): after it,
        # the id's last transaction is readable - what a task relies on to skip
        t3 = TaskTransaction.begin(c, txn_id, 60000)
        t3.produce({tp: [batch(b"c1")]})
        end_all(c, [t3.handle], commit=True)
        TaskTransaction.begin(c, txn_id, 60000)
        assert [v for _, v in read_marker_records(c, tp)][-1] == b"c1"
    assert read_committed(broker.bootstrap, topic_name, 6) == [
        b"a1", b"a2", b"a3", b"b1", b"open", b"c1"]
