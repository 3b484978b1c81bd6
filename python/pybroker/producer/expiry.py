"""Forget idle idempotent producers (Kafka's producer.id.expiration.ms).

Each partition log keeps the last batches of every producer id that wrote to
it, for duplicate detection. A producer that has not written for
`producer.id.expiration.ms` (default one day) is dropped from that state every
`producer.id.expiration.check.interval.ms` (default ten minutes), so the state
does not grow with every short-lived producer. A producer that comes back
after that is accepted at whatever sequence it sends, as Kafka accepts a
producer it has no state for; only a retry of a batch written before the
expiry would no longer be recognised as a duplicate.

A producer with a transaction open in a partition is never dropped there (Kafka's
rule too): its state holds the transaction's first offset, which keeps the last
stable offset down until the marker ends it; forgetting it would let
read_committed consumers past uncommitted data."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import anyio

from pybroker.log.partition import Partition

log = logging.getLogger(__name__)


def expire_pass(partitions: Iterable[Partition], max_age_ms: int,
                now_ms: int | None = None) -> int:
    """Drop producers idle for max_age_ms from every log; returns how many were dropped."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    dropped = 0
    # in-memory state only, no I/O: cheap enough to run on the event loop
    for partition in partitions:
        dropped += partition.log.remove_expired_producers(now, max_age_ms)
    if dropped:
        log.info("forgot %d producer id(s) idle for %d ms", dropped, max_age_ms)
    return dropped


async def expiry_loop(partitions: Callable[[], Iterable[Partition]], interval_ms: int,
                      max_age_ms: int) -> None:
    while True:
        await anyio.sleep(interval_ms / 1000)
        expire_pass(list(partitions()), max_age_ms)
