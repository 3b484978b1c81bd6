"""Kafka's replica-placement tools against a 3-broker pybroker cluster on ZooKeeper:
kafka-reassign-partitions --generate/--execute/--verify, kafka-leader-election (preferred)
after a leader moved away, kafka-topics --describe with its partition filters
(--under-replicated-partitions, --at-min-isr-partitions, --unavailable-partitions). Skipped
without KAFKA_HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster.cluster import Cluster, wait_for
from tests.java.kafka import requires_kafka, tool
from tests.java.test_tools import PARTITION_LINE, produce

pytestmark = [requires_kafka, pytest.mark.timeout(400)]


def describe(bootstrap: str, *args: str) -> dict[tuple[str, int], dict[str, str]]:
    out = tool("kafka-topics.sh", "--bootstrap-server", bootstrap, "--describe", *args).ok()
    return {(m["topic"], int(m["p"])): m.groupdict()
            for m in map(PARTITION_LINE.match, out.stdout.splitlines()) if m}


def test_reassign_partitions_generate_execute_verify(cluster: Cluster, tmp_path: Path) -> None:
    b = cluster.bootstrap
    topic = "moving"
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--replica-assignment", "1:2,2:3").ok()
    produce(b, topic, {0: 200, 1: 100})
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))

    generated = tool("kafka-reassign-partitions.sh", "--bootstrap-server", b, "--generate",
                     "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3").ok()
    lines = generated.lines()
    current = json.loads(lines[lines.index("Current partition replica assignment") + 1])
    proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    assert sorted((p["partition"], p["replicas"]) for p in current["partitions"]) == [
        (0, [1, 2]), (1, [2, 3])]
    assert {p["partition"] for p in proposed["partitions"]} == {0, 1}
    assert all(len(p["replicas"]) == 2 for p in proposed["partitions"])

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [3, 1]},
        {"topic": topic, "partition": 1, "replicas": [1, 2, 3]}]}))
    executed = tool("kafka-reassign-partitions.sh", "--bootstrap-server", b, "--execute",
                    "--reassignment-json-file", str(plan)).ok()
    assert "Successfully started partition reassignments for moving-0,moving-1" in executed.stdout

    def verified() -> str | None:
        out = tool("kafka-reassign-partitions.sh", "--bootstrap-server", b, "--verify",
                   "--reassignment-json-file", str(plan)).ok().stdout
        return out if ("Reassignment of partition moving-0 is completed." in out
                       and "Reassignment of partition moving-1 is completed." in out) else None
    wait_for(verified, 120, "the reassignment to complete", poll_s=2)

    parts = describe(b, "--topic", topic)
    assert parts[(topic, 0)]["replicas"] == "3,1"
    assert sorted(parts[(topic, 0)]["isr"].split(",")) == ["1", "3"]
    assert parts[(topic, 1)]["replicas"] == "1,2,3"
    assert sorted(parts[(topic, 1)]["isr"].split(",")) == ["1", "2", "3"]
    # the moved replicas hold the data: each partition reads back whole from its leader
    assert len(cluster.read_partition(topic, 0)) == 200
    assert len(cluster.read_partition(topic, 1)) == 100


def test_preferred_leader_election_and_isr_filters(cluster: Cluster) -> None:
    b = cluster.bootstrap
    topic = "elect"
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--replica-assignment", "2:1:3", "--config", "min.insync.replicas=2").ok()
    cluster.wait_full_isr(topic, 1)
    assert (topic, 0) not in describe(b, "--at-min-isr-partitions")
    assert describe(b, "--topic", topic)[(topic, 0)]["leader"] == "2"

    cluster.kill(2)
    cluster.wait_leader_not(topic, 0, 2)
    live = ",".join(cluster.brokers[i].bootstrap for i in cluster.live())
    under = describe(live, "--under-replicated-partitions")
    assert (topic, 0) in under
    assert "2" not in under[(topic, 0)]["isr"].split(",")
    assert (topic, 0) in describe(live, "--at-min-isr-partitions")  # ISR 2 = min.insync 2
    assert (topic, 0) not in describe(live, "--unavailable-partitions")

    cluster.restart(2)
    cluster.wait_full_isr(topic, 1, timeout_s=90)
    assert (topic, 0) not in describe(b, "--under-replicated-partitions")
    assert describe(b, "--topic", topic)[(topic, 0)]["leader"] != "2"

    elected = tool("kafka-leader-election.sh", "--bootstrap-server", b, "--election-type",
                   "preferred", "--topic", topic, "--partition", "0").ok()
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" \
        in elected.stdout
    wait_for(lambda: describe(b, "--topic", topic)[(topic, 0)]["leader"] == "2", 30,
             "broker 2 to lead again")
    again = tool("kafka-leader-election.sh", "--bootstrap-server", b, "--election-type",
                 "preferred", "--topic", topic, "--partition", "0").ok()
    assert f"Valid replica already elected for partitions {topic}-0" in again.stdout

    unknown = tool("kafka-leader-election.sh", "--bootstrap-server", b, "--election-type",
                   "preferred", "--topic", "no-such-topic", "--partition", "0")
    assert unknown.returncode == 1
    assert "UnknownTopicOrPartitionException" in unknown.output
