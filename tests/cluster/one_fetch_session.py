"""Two topics led by one broker and followed by another in one fetch session, with the
follower never the controller (its ZooKeeper link can be frozen while a deletion goes
through the controller): the set-up of the follower fetch-session tests."""

from __future__ import annotations

from confluent_kafka.admin import NewTopic

from tests.cluster.cluster import WAIT_S, Cluster, wait_for


def fetches(cluster: Cluster, broker_id: int) -> float:
    """Fetch requests `broker_id` has handled so far (its metrics endpoint)."""
    return cluster.metrics(broker_id).get('pybroker_requests_total{api="Fetch"}', 0.0)


def hosts(cluster: Cluster, broker_id: int, topic: str) -> bool:
    """Whether `broker_id` still has a log dir for `topic`'s partition 0."""
    return (cluster.brokers[broker_id].data_dir / f"{topic}-0").exists()


def topics_in_one_fetch_session(cluster: Cluster, topics: tuple[str, ...]
                                ) -> tuple[int, int, int]:
    """Create one-partition `topics`, each led by the same broker and followed by the
    same non-controller broker; (leader, follower, third broker) once every ISR is full."""
    admin = cluster.admin()
    controller = wait_for(cluster.controller, what="a controller")
    follower = next(b for b in sorted(cluster.brokers) if b != controller)
    leader, third = (b for b in sorted(cluster.brokers) if b != follower)
    for topic in topics:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1,
                                      replica_assignment=[[leader, follower, third]])],
                            request_timeout=WAIT_S)[topic].result(WAIT_S)
        cluster.wait_full_isr(topic, 1)
        wait_for(lambda t=topic: cluster.leader(t, 0) == leader,
                 what=f"broker {leader} to lead {topic}")
    return leader, follower, third
