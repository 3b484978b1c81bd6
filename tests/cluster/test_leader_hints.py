"""KIP-951 on a live cluster: a Produce (v10) or Fetch (v16+) sent to a broker that does
not lead the partition is answered NOT_LEADER_OR_FOLLOWER with the partition's current
leader and epoch and that leader's endpoint, as Kafka's KafkaApis (getCurrentLeader)
answers; older versions carry no hint (Fetch v12-15 has the field but Kafka leaves it
at -1)."""

from __future__ import annotations

import uuid
from typing import Any

from tests.cluster.cluster import Cluster
from tests.integration.protoclient import ProtoClient
from tests.integration.rawclient import Rec, build_batch

PRODUCE, FETCH = 0, 1
NOT_LEADER_OR_FOLLOWER = 6


def produce(pc: ProtoClient, version: int, topic: str) -> dict[str, Any]:
    answer = pc.request(PRODUCE, version, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [
                {"index": 0, "records": build_batch([Rec(b"v")])}]}]})
    return answer


def fetch(pc: ProtoClient, version: int, topic: str, topic_id: uuid.UUID) -> dict[str, Any]:
    return pc.request(FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
        "forgotten_topics_data": [], "rack_id": ""})


def topic_id_of(bootstrap: str, topic: str) -> uuid.UUID:
    with ProtoClient(bootstrap) as pc:
        meta = pc.request(3, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})
    found = meta["topics"][0]["topic_id"]
    return found if isinstance(found, uuid.UUID) else uuid.UUID(bytes=bytes(found))


def test_not_leader_answers_name_the_leader(cluster: Cluster) -> None:
    topic = "hinted"
    cluster.create_topic(topic, 1, replication=1)
    leader = cluster.leader(topic, 0)
    epoch = cluster.state(topic, 0)["leader_epoch"]
    other = next(b for b in cluster.live() if b != leader)
    leader_host, leader_port = cluster.brokers[leader].bootstrap.rsplit(":", 1)
    endpoint = {"node_id": leader, "host": leader_host, "port": int(leader_port),
                "rack": None}
    hint = {"leader_id": leader, "leader_epoch": epoch}
    no_hint = {"leader_id": -1, "leader_epoch": -1}
    topic_id = topic_id_of(cluster.brokers[leader].bootstrap, topic)
    with ProtoClient(cluster.brokers[other].bootstrap) as pc:
        answer = produce(pc, 10, topic)
        part = answer["responses"][0]["partition_responses"][0]
        assert part["error_code"] == NOT_LEADER_OR_FOLLOWER
        assert part["current_leader"] == hint
        assert answer["node_endpoints"] == [endpoint]
        part = produce(pc, 9, topic)["responses"][0]["partition_responses"][0]
        assert part["error_code"] == NOT_LEADER_OR_FOLLOWER
        for version in (16, 17):
            answer = fetch(pc, version, topic, topic_id)
            part = answer["responses"][0]["partitions"][0]
            assert part["error_code"] == NOT_LEADER_OR_FOLLOWER
            assert part["current_leader"] == hint, version
            assert answer["node_endpoints"] == [endpoint]
        part = fetch(pc, 15, topic, topic_id)["responses"][0]["partitions"][0]
        assert part["error_code"] == NOT_LEADER_OR_FOLLOWER
        assert part["current_leader"] == no_hint
    with ProtoClient(cluster.brokers[leader].bootstrap) as pc:
        answer = produce(pc, 10, topic)
        part = answer["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0 and part["current_leader"] == no_hint
        assert answer["node_endpoints"] == []
