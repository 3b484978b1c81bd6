"""What the fault tests share: the topic they produce to, the failover bound, and
the producers and accounting of tests/cluster/workload.py bound to a Cluster."""

from __future__ import annotations

import time

from tests.cluster import workload
from tests.cluster.cluster import WAIT_S, Cluster, wait_for
from tests.cluster.workload import ContinuousProducer

PARTITIONS = 3
#: RF=3 with min.insync.replicas=2: one broker may die without refusing acks=all
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
#: the issue's bound on failover: from kill -9 to the first write acknowledged by the
#: new leader (ZooKeeper notices the death after the 6 s session timeout)
FAILOVER_S = 10.0


def start_producers(cluster: Cluster, topic: str) -> tuple[ContinuousProducer, ...]:
    return workload.start_producers(cluster.bootstrap, topic, PARTITIONS, timeout_s=WAIT_S)


def assert_nothing_lost(cluster: Cluster, topic: str,
                        producers: tuple[ContinuousProducer, ...]) -> dict[str, int]:
    return workload.assert_nothing_lost(lambda p: cluster.read_partition(topic, p), PARTITIONS,
                                        producers)


def wait_served(producers: tuple[ContinuousProducer, ...], partition: int, killed_at: float,
                bound_s: float = FAILOVER_S) -> float:
    """Wait until every producer has a write to `partition` acknowledged after the
    leader was killed at `killed_at` (monotonic), within `bound_s` of the kill; return
    the seconds from the kill to the first such acknowledgement. Reports of answers
    read before the kill arrive within milliseconds of it, hence the 0.1 s margin."""
    since = killed_at + 0.1
    for producer in producers:
        wait_for(lambda p=producer: p.acked_after(partition, since),
                 max(0.0, bound_s - (time.monotonic() - killed_at)),
                 f"{producer.tag}: a write to partition {partition} acknowledged after the "
                 f"kill, within {bound_s}s")
    return min(p.acked_after(partition, since)[0].at for p in producers) - killed_at
