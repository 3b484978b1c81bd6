"""Replica assignment for new topics and partitions, as the seeds describe it:
partition i's first replica (its preferred leader) on broker i mod n, and its
j-th replica on broker (i + j) mod n, over the live brokers sorted by id — so
leaders and replicas spread evenly and every broker leads 1/n of the
partitions."""

from __future__ import annotations

from pybroker.errors import ErrorCode, KafkaError


def assign_replicas(
    num_partitions: int, replication_factor: int, brokers: list[int], first_partition: int = 0
) -> list[list[int]]:
    """Replica lists for partitions first_partition .. first_partition + num_partitions - 1."""
    ordered = sorted(brokers)
    count = len(ordered)
    if replication_factor > count:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{count} broker(s) are registered.")
    return [
        [ordered[(i + j) % count] for j in range(replication_factor)]
        for i in range(first_partition, first_partition + num_partitions)
    ]
