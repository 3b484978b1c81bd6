"""Real ids for generated requests to name: a stable group member, an idempotent producer.

Without them a generated Heartbeat, SyncGroup or OffsetCommit stops at
UNKNOWN_MEMBER_ID and a produce never reaches the producer-state checks.
``establish`` makes them with valid requests (through whatever sends requests: the
in-process dispatcher or a raw socket) and returns the ``Names`` the strategies draw
from. The member's session lasts the longest Kafka allows by default (30 min), so it
outlives any run that does not rebalance it away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .strategies import PLAYGROUND, Names

Send = Callable[[int, int, dict[str, Any]], dict[str, Any]]

JOIN_GROUP, SYNC_GROUP, INIT_PRODUCER_ID = 11, 14, 22
SESSION_TIMEOUT_MS = 1_800_000  # group.max.session.timeout.ms's default


def establish(send: Send, names: Names = PLAYGROUND) -> Names:
    group = names.groups[0]
    joined = send(JOIN_GROUP, 3, {
        "group_id": group, "session_timeout_ms": SESSION_TIMEOUT_MS,
        "rebalance_timeout_ms": 60_000, "member_id": "", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]})
    assert joined["error_code"] == 0, joined
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
