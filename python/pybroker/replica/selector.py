"""KIP-392 replica selection: which replica a consumer should fetch from
(`replica.selector.class`), decided by the partition's leader on each consumer fetch
(Fetch v11+, which carries the consumer's `client.rack`).

Kafka's RackAwareReplicaSelector: a consumer with a rack is sent to a replica on that
rack — the leader if it is there, else the most caught-up replica there (highest log
end offset, then the one caught up most recently); a consumer without a rack, or with
no replica on its rack, stays on the leader. Only replicas that have everything below
the high watermark are candidates (Kafka's findPreferredReadReplica), so a consumer
sent to a follower finds there what it would have read from the leader."""

from __future__ import annotations

from collections.abc import Mapping

from pybroker.config import RACK_AWARE_SELECTOR
from pybroker.replica.partition import ReplicaPartition


def preferred_read_replica(selector: str | None, partition: ReplicaPartition,
                           client_rack: str, racks: Mapping[int, str | None],
                           now_ms: int) -> int:
    """The broker the consumer should fetch from instead of this leader, or -1 (the
    leader itself, or no selector). `racks` maps each live broker to its rack."""
    if selector != RACK_AWARE_SELECTOR or not client_rack or not partition.is_leader:
        return -1
    if racks.get(partition.broker_id) == client_rack:
        return -1
    hw = partition.high_watermark
    candidates = [
        (state.log_end_offset, -(now_ms - state.caught_up_ms()), broker)
        for broker, state in partition.followers.items()
        if broker in racks and racks[broker] == client_rack and state.log_end_offset >= hw
    ]
    return max(candidates)[2] if candidates else -1
