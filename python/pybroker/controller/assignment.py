"""Replica assignment for new topics and partitions.

Without racks, as the seeds describe it: partition i's first replica (its preferred
leader) on broker i mod n, and its j-th replica on broker (i + j) mod n, over the
live brokers sorted by id — so leaders and replicas spread evenly and every broker
leads 1/n of the partitions.

When every broker has a `broker.rack`, Kafka's rack-aware assignment
(AdminUtils.assignReplicasToBrokersRackAware) with a fixed start: the brokers are
listed alternating racks (rack a's first, rack b's first, ..., rack a's second, ...),
partition i's leader is the i-th of that list, and each further replica is the next
broker along (by Kafka's shifting step) on a rack that has no replica of the
partition yet, until every rack has one; only then does a rack get a second. So a
partition is on as many racks as it can be. Some brokers with a rack and some
without is refused, as Kafka refuses it."""

from __future__ import annotations

from collections.abc import Mapping

from pybroker.errors import ErrorCode, KafkaError


def assign_replicas(
    num_partitions: int, replication_factor: int, brokers: list[int], first_partition: int = 0,
    racks: Mapping[int, str | None] | None = None,
) -> list[list[int]]:
    """Replica lists for partitions first_partition .. first_partition + num_partitions - 1;
    `racks` maps broker id -> rack (None or missing: no rack)."""
    ordered = sorted(brokers)
    count = len(ordered)
    if replication_factor > count:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{count} broker(s) are registered.")
    known = {b: (racks or {}).get(b) for b in ordered}
    with_rack = {b: r for b, r in known.items() if r}
    if with_rack:
        if len(with_rack) != count:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Not all brokers have rack information for replica rack aware "
                             "assignment.")
        return _rack_aware(num_partitions, replication_factor, with_rack, first_partition)
    return [
        [ordered[(i + j) % count] for j in range(replication_factor)]
        for i in range(first_partition, first_partition + num_partitions)
    ]


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered by alternating racks (racks sorted, brokers sorted in each)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(racks):
        out += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return out


def _replica_index(first: int, shift: int, j: int, count: int) -> int:
    """Kafka's replicaIndex: the j-th candidate after the leader, stepping by `shift`."""
    return (first + 1 + (shift + j) % (count - 1)) % count


def _rack_aware(num_partitions: int, replication_factor: int, racks: Mapping[int, str],
                first_partition: int) -> list[list[int]]:
    arranged = rack_alternated(racks)
    count = len(arranged)
    rack_count = len(set(racks.values()))
    shift = 0
    out = []
    for partition in range(first_partition, first_partition + num_partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = partition % count
        leader = arranged[first]
        replicas = [leader]
        used_racks = {racks[leader]}
        k = 0
        while len(replicas) < replication_factor:
            broker = arranged[_replica_index(first, shift * rack_count, k, count)]
            k += 1
            rack = racks[broker]
            if ((rack not in used_racks or len(used_racks) == rack_count)
                    and (broker not in replicas or len(replicas) == count)):
                replicas.append(broker)
                used_racks.add(rack)
        out.append(replicas)
    return out
