"""Real ids for generated requests to name: a stable group member, an idempotent producer.

Without them a generated Heartbeat, SyncGroup or OffsetCommit stops at
UNKNOWN_MEMBER_ID and a produce never reaches the producer-state checks.
``establish`` makes them with valid requests (through whatever sends requests: the
in-process dispatcher or a raw socket) and returns the ``Names`` the strategies draw
from. The member's session lasts the longest Kafka allows by default (30 min), so it
outlives any run that does not rebalance it away.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .strategies import PLAYGROUND, Names

Send = Callable[[int, int, dict[str, Any]], dict[str, Any]]

FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, INIT_PRODUCER_ID = 10, 11, 14, 22
#: the coordinator is not ready yet (the offsets topic is being created and loaded)
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
READY_TIMEOUT_S = 30.0
SESSION_TIMEOUT_MS = 1_800_000  # group.max.session.timeout.ms's default


def establish(send: Send, names: Names = PLAYGROUND) -> Names:
    group = names.groups[0]
    joined = retry(lambda: send(JOIN_GROUP, 3, {
        "group_id": group, "session_timeout_ms": SESSION_TIMEOUT_MS,
        "rebalance_timeout_ms": 60_000, "member_id": "", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]}),
        before=lambda: send(FIND_COORDINATOR, 1, {"key": group, "key_type": 0}))
    member, generation = joined["member_id"], joined["generation_id"]
    synced = send(SYNC_GROUP, 2, {
        "group_id": group, "generation_id": generation, "member_id": member,
        "assignments": [{"member_id": member, "assignment": b""}]})
    assert synced["error_code"] == 0, synced
    producer = send(INIT_PRODUCER_ID, 1, {"transactional_id": None,
                                          "transaction_timeout_ms": 60_000})
    assert producer["error_code"] == 0, producer
    return Names(topics=names.topics, groups=names.groups, members=(member,),
                 generations=(generation,),
                 producers=((producer["producer_id"], producer["producer_epoch"]),))


def retry(call: Callable[[], dict[str, Any]],
          before: Callable[[], Any]) -> dict[str, Any]:
    """``call`` until its error is not a coordinator still getting ready (as clients do:
    FindCoordinator first, then again after each retriable error), bounded."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        before()
        response = call()
        if response["error_code"] not in RETRIABLE or time.monotonic() > deadline:
            assert response["error_code"] == 0, response
            return response
        time.sleep(0.1)
