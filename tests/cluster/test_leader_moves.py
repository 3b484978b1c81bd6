"""Idempotent producers while reassignments move every partition's leadership again
and again (each move drops one broker from the replicas and builds a replica on
another by replication): nothing acknowledged is lost or reordered, and no record is
written twice. Each move is a leader change with pipelined retries reaching a new
leader (see ReplicaManager.until_taken_over)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cluster import workload
from tests.cluster.cluster import WAIT_S, Cluster, wait_for
from tests.cluster.operate import add_broker, tool

PARTITIONS = 6
#: reassignments (each moves all partitions; PYBROKER_LEADER_MOVES=8 for a longer hunt)
MOVES = int(os.environ.get("PYBROKER_LEADER_MOVES", "2"))
#: the replica sets moved through, in turn (broker 4 is added first)
REPLICA_SETS = [[2, 3, 4], [4, 1, 2], [3, 4, 1], [1, 2, 3]]
MOVE_S = 90.0


@pytest.mark.timeout(120 + 60 * MOVES)
def test_idempotent_producers_through_repeated_leader_moves(cluster: Cluster,
                                                           tmp_path: Path) -> None:
    topic = "moves"
    cluster.create_topic(topic, PARTITIONS, configs={"min.insync.replicas": "2"})
    add_broker(cluster, 4)
    producers = [workload.ContinuousProducer(
        cluster.bootstrap, topic, PARTITIONS, f"idem{i}", rate=400,
        config={"enable.idempotence": True, "linger.ms": 1}).start() for i in range(3)]
    for producer in producers:
        producer.wait_acked(30, WAIT_S)
    bootstrap = cluster.brokers[2].bootstrap
    for move in range(MOVES):
        replicas = REPLICA_SETS[move % len(REPLICA_SETS)]
        # partition p led by a different broker of the set than p - 1
        plan = tmp_path / f"move{move}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": p, "replicas": replicas[p % 3:] + replicas[:p % 3]}
            for p in range(PARTITIONS)]}))
        tool("reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
             "--reassignment-json-file", str(plan))

        def completed(plan: Path = plan) -> bool:
            return "still in progress" not in tool(
                "reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                "--reassignment-json-file", str(plan))
        wait_for(completed, MOVE_S, f"move {move} to complete", poll_s=1.0)
        for producer in producers:
            producer.wait_acked(20, WAIT_S)
    workload.assert_nothing_lost(lambda p: cluster.read_partition(topic, p), PARTITIONS,
                                 producers)
