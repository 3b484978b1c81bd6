"""A follower that takes over a partition records the new leader epoch in its
leader-epoch-checkpoint (off the event loop since issue 25) before it serves: after
kill -9 of the old leader and then of the new one, the new leader's file on disk has the
epoch, starting exactly at the first batch written under it, and every acknowledged
record of a real producer is read back once the brokers return."""

from __future__ import annotations

import struct
import time

from tests.cluster.cluster import WAIT_S, Cluster
from tests.cluster.scenario import (
    PARTITIONS,
    TOPIC_CONFIGS,
    assert_nothing_lost,
    start_producers,
    wait_served,
)


def batch_epochs(log: bytes) -> list[tuple[int, int]]:
    """(base offset, partition leader epoch) of every batch of a log's segments."""
    out = []
    position = 0
    while position + 16 <= len(log):
        base, length, epoch = struct.unpack_from(">qii", log, position)
        if length <= 0:
            break
        out.append((base, epoch))
        position += 12 + length
    return out


def checkpoint_entries(cluster: Cluster, broker_id: int, topic: str, partition: int
                       ) -> dict[int, int]:
    """epoch -> start offset, as the broker's leader-epoch-checkpoint file has them."""
    path = cluster.brokers[broker_id].data_dir / f"{topic}-{partition}" / "leader-epoch-checkpoint"
    lines = path.read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2, lines
    return {int(e): int(s) for e, s in (line.split() for line in lines[2:])}


def test_a_new_leaders_epoch_is_on_disk_from_its_first_batch_after_kill_9(
        cluster: Cluster) -> None:
    topic = "epoch-takeover"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    victim = cluster.leader(topic, 0)
    old_epoch = cluster.state(topic, 0)["leader_epoch"]

    cluster.kill(victim)
    killed_at = time.monotonic()
    new_leader = cluster.wait_leader_not(topic, 0, victim)
    new_epoch = cluster.state(topic, 0)["leader_epoch"]
    assert new_epoch > old_epoch
    wait_served(producers, 0, killed_at)
    for producer in producers:
        producer.wait_acked(20, WAIT_S, partition=0)  # more batches under the new epoch

    # the new leader dies too, uncleanly: what it wrote is what is on its disk now
    cluster.kill(new_leader)
    entries = checkpoint_entries(cluster, new_leader, topic, 0)
    assert new_epoch in entries, entries
    batches = batch_epochs(cluster.log_bytes(new_leader, topic, 0))
    first_new = min(base for base, epoch in batches if epoch == new_epoch)
    # the epoch starts where the follower's log ended when it took over: every batch
    # before it is of an older epoch, every one from it of the new epoch
    assert entries[new_epoch] == first_new
    assert all(epoch < new_epoch for base, epoch in batches if base < first_new)
    # no epoch past the new one; a new leader that had fetched nothing before it took
    # over (the first batches still on their way) has no older epoch recorded at all
    assert all(e < new_epoch for e in entries if e != new_epoch), entries

    cluster.restart(victim)
    cluster.restart(new_leader)
    cluster.wait_full_isr(topic, PARTITIONS)
    totals = assert_nothing_lost(cluster, topic, producers)
    assert all(count > 20 for count in totals.values()), totals
