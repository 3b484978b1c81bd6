"""Helpers for the transaction tests with real clients: transactional producers
and read_committed / read_uncommitted readers with bounded waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

T = TypeVar("T")
WAIT_S = 30.0


def txn_producer(bootstrap: str, transactional_id: str, **conf: Any) -> Producer:
    base: dict[str, Any] = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                            "linger.ms": 5, "socket.timeout.ms": 10000}
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(base)


def read_all(bootstrap: str, topic: str, partitions: list[int], isolation: str,
             until: Callable[[list[bytes]], bool], timeout_s: float = WAIT_S) -> list[bytes]:
    """Values read from the start of every partition (assign, no group) until
    `until(values)` holds; AssertionError at the deadline."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-test-reader",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if until(out):
                return out
            msg = c.poll(0.2)
            if msg is None or msg.error():
                if msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"consume error: {msg.error()}")
                continue
            out.append(msg.value())
        raise AssertionError(f"{isolation} read of {topic} never satisfied the condition; "
                             f"got {len(out)} records: {out[:20]!r}")
    finally:
        c.close()


def settle(bootstrap: str, topic: str, partitions: list[int], isolation: str,
           quiet_s: float = 1.5, timeout_s: float = WAIT_S) -> list[bytes]:
    """Everything readable now: values read until every partition reached its end
    (for read_committed: the last stable offset) and nothing came for quiet_s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-test-settle",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[bytes] = []
        at_end: set[int] = set()
        last = time.monotonic()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                if len(at_end) == len(partitions) and time.monotonic() - last > quiet_s:
                    return out
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise AssertionError(f"consume error: {msg.error()}")
            at_end.discard(msg.partition())
            last = time.monotonic()
            out.append(msg.value())
        raise AssertionError(f"{topic} did not settle within {timeout_s}s")
    finally:
        c.close()


def wait_for(condition: Callable[[], T], timeout_s: float = WAIT_S, what: str = "condition",
             poll_s: float = 0.1) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(poll_s)
