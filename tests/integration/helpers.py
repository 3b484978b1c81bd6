"""Client helpers shared by the integration tests (confluent-kafka based unless noted)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.protoclient import ProtoClient

OP_TIMEOUT_S = 10.0
METADATA = 3

Headers = list[tuple[str, bytes | None]]


@dataclass
class Got:
    """A consumed record, client independent."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    timestamp: int | None = None


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> None:
    a = admin(bootstrap)
    fut = a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                    config=config or {})],
                          operation_timeout=OP_TIMEOUT_S, request_timeout=OP_TIMEOUT_S)
    fut[name].result(timeout=OP_TIMEOUT_S)
    wait_topic(bootstrap, name, partitions)


def wait_topic(bootstrap: str, name: str, partitions: int, timeout: float = OP_TIMEOUT_S) -> None:
    """Wait until metadata shows the topic with ``partitions`` partitions all having leaders."""
    a = admin(bootstrap)
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        md = a.list_topics(topic=name, timeout=5)
        t = md.topics.get(name)
        last = t
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
            p.leader >= 0 for p in t.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} not ready with {partitions} partitions: {last}")


def producer(bootstrap: str, **conf: Any) -> Producer:
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "message.timeout.ms": 10000,
        "socket.timeout.ms": 10000,
    }
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(base)


def produce_all(p: Producer, topic: str, records: list[dict[str, Any]],
                timeout: float = OP_TIMEOUT_S) -> list[Message]:
    """Produce dicts of Producer.produce kwargs; return the delivery reports in order."""
    reports: list[Message | None] = [None] * len(records)

    def cb(i: int):  # type: ignore[no-untyped-def]
        def _cb(err: KafkaError | None, msg: Message) -> None:
            reports[i] = msg
        return _cb

    for i, r in enumerate(records):
        while True:
            try:
                p.produce(topic, on_delivery=cb(i), **r)
                break
            except BufferError:
                p.poll(0.1)
    remaining = p.flush(timeout)
    assert remaining == 0, f"{remaining} messages not delivered within {timeout}s"
    out = [m for m in reports if m is not None]
    assert len(out) == len(records)
    return out


def assert_delivered(reports: list[Message]) -> None:
    errors = [m.error() for m in reports if m.error() is not None]
    assert not errors, f"{len(errors)} delivery errors, first: {errors[0]}"


def consumer(bootstrap: str, **conf: Any) -> Consumer:
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": "pybroker-it-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "socket.timeout.ms": 10000,
        "fetch.wait.max.ms": 100,
    }
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Consumer(base)


def consume_confluent(bootstrap: str, topic: str, count: int, partitions: list[int] | None = None,
                      offset: int = 0, timeout: float = OP_TIMEOUT_S, **conf: Any) -> list[Got]:
    """assign() (no group) from ``offset`` on each partition and read ``count`` records."""
    c = consumer(bootstrap, **conf)
    try:
        parts = partitions if partitions is not None else [0]
        c.assign([TopicPartition(topic, p, offset) for p in parts])
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(msg.error())
            _ts_type, ts = msg.timestamp()
            out.append(Got(msg.partition(), msg.offset(), msg.key(), msg.value(),
                           list(msg.headers() or []), ts))
        assert len(out) >= count, f"consumed {len(out)}/{count} records from {topic}"
        return out
    finally:
        c.close()


def topic_partitions(bootstrap: str, topic: str) -> int:
    md = admin(bootstrap).list_topics(topic=topic, timeout=5)
    return len(md.topics[topic].partitions)


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    c = consumer(bootstrap)
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=OP_TIMEOUT_S)
        return int(lo), int(hi)
    finally:
        c.close()


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    """The topic's id as Metadata v12 gives it."""
    with ProtoClient(bootstrap) as pc:
        reply = pc.request(METADATA, 12, {"topics": [{"name": topic}],
                                          "allow_auto_topic_creation": False})
    (found,) = reply["topics"]
    assert found["error_code"] == 0, found
    return found["topic_id"]
