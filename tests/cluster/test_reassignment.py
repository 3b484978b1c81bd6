"""Partition reassignment on a live cluster (issue 15): grow 3 brokers to 4 under
acks=all produce and move a topic onto the new broker with `pybroker
reassign-partitions` (--generate, --execute, --verify), then cancel a throttled
move."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource

from tests.cluster.cluster import WAIT_S, Cluster, cluster_fixture, wait_for
from tests.cluster.operate import BackgroundConsumer, add_broker, partition_dirs, tool
from tests.cluster.scenario import (
    PARTITIONS,
    TOPIC_CONFIGS,
    assert_nothing_lost,
    start_producers,
)
from tests.cluster.zookeeper import ZooKeeperServer
from tests.conftest import Broker

#: a reassignment of a few hundred KB must complete within this (loaded 2-core box)
REASSIGN_S = 60.0


def _proposed(generate_output: str) -> dict:
    lines = generate_output.strip().splitlines()
    assert lines[0] == "Current partition replica assignment", generate_output
    at = lines.index("Proposed partition reassignment configuration")
    return json.loads(lines[at + 1])


def test_grow_to_four_brokers_and_move_a_topic_onto_the_new_one(
        cluster: Cluster, tmp_path: Path) -> None:
    topic = "grow"
    cluster.create_topic(topic, PARTITIONS, configs=TOPIC_CONFIGS)
    producers = start_producers(cluster, topic)
    consumer = BackgroundConsumer(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        consumer.wait_more(50, WAIT_S)
        new = add_broker(cluster, 4)
        bootstrap = cluster.brokers[2].bootstrap

        topics_file = tmp_path / "topics.json"
        topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
        proposed = _proposed(tool("reassign-partitions", "--bootstrap-server", bootstrap,
                                  "--generate", "--topics-to-move-json-file", str(topics_file),
                                  "--broker-list", "2,3,4"))
        targets = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
        assert sorted(targets) == list(range(PARTITIONS))
        assert all(sorted(r) == [2, 3, 4] for r in targets.values()), targets
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(proposed))

        out = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                   "--reassignment-json-file", str(plan))
        assert out.startswith("Current partition replica assignment\n\n{"), out
        assert "Save this to use as the --reassignment-json-file option during rollback" in out
        assert out.strip().endswith(
            "Successfully started partition reassignments for grow-0,grow-1,grow-2"), out

        def verified() -> str | None:
            text = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                        "--reassignment-json-file", str(plan))
            return text if "still in progress" not in text else None
        report = wait_for(verified, REASSIGN_S, "--verify to report completion", poll_s=1.0)
        assert report.startswith("Status of partition reassignment:\n"), report
        for p in range(PARTITIONS):
            assert f"Reassignment of partition grow-{p} is completed." in report, report

        described = cluster.describe(topic)
        for p, target in targets.items():
            assert described[p]["replicas"] == target, described[p]["line"]
            wait_for(lambda p=p: cluster.isr(topic, p) == [2, 3, 4], WAIT_S,
                     f"{topic}-{p}'s ISR to be the new replicas")
            assert cluster.leader(topic, p) in target
        # the replicas moved away are gone from broker 1's disk; broker 4 holds them all
        wait_for(lambda: not partition_dirs(cluster.brokers[1], topic), WAIT_S,
                 "broker 1 to delete its replicas of the topic")
        assert partition_dirs(new, topic) == set(range(PARTITIONS))
        assert "No partition reassignments found." in tool(
            "reassign-partitions", "--bootstrap-server", bootstrap, "--list")

        # writes and reads go on against the new replica set
        for producer in producers:
            producer.wait_acked(30, WAIT_S)
        consumer.wait_more(50, WAIT_S)
    finally:
        consumer.stop()
    assert_nothing_lost(cluster, topic, producers)


RATE = 100_000


@pytest.fixture
def leader_throttled_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
                             request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers whose leaders throttle out-of-sync followers to RATE B/s (a static
    config here; Kafka's tool sets it as a dynamic broker config)."""
    yield from cluster_fixture(zookeeper, tmp_path, request, overrides={
        "leader.replication.throttled.rate": RATE})


def _fill(cluster: Cluster, topic: str) -> None:
    """3 MB in partition 0: half a minute's worth at the throttle."""
    cluster.create_topic(topic, 1, configs=TOPIC_CONFIGS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 20})
    payload = b"x" * 1000
    for _ in range(3000):
        while True:
            try:
                producer.produce(topic, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(WAIT_S) == 0


def _throttled_move_then_cancel(cluster: Cluster, tmp_path: Path, topic: str,
                                new: Broker) -> None:
    """Move partition 0 onto `new` with --throttle: the copy stays under the bound and
    the move in progress; then cancel it, which reverts the replicas and deletes the
    new replica."""
    original = cluster.describe(topic)[0]["replicas"]
    target = [new_id := int(new.overrides["broker.id"])] + original[1:]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target}]}))
    bootstrap = cluster.brokers[1].bootstrap

    started = time.monotonic()
    out = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
               "--reassignment-json-file", str(plan), "--throttle", str(RATE))
    assert f"The inter-broker throttle limit was set to {RATE} B/s" in out, out
    assert f"Successfully started partition reassignment for {topic}-0" in out, out
    wait_for(lambda: partition_dirs(new, topic) == {0}, WAIT_S, "the new replica to open")
    time.sleep(3.0)  # let the throttled follower copy what it may
    copied = sum(p.stat().st_size for p in (new.data_dir / f"{topic}-0").glob("*.log"))
    elapsed = time.monotonic() - started
    # loosely: one fetch's worth (replica.fetch.max.bytes, 1 MiB) plus the rate over the
    # time, far below the 3 MB an unthrottled follower copies in that time
    assert copied <= (1 << 20) + RATE * elapsed * 2, (copied, elapsed, out)
    listed = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--list")
    assert f"{topic}-0: replicas: " in listed and f"adding: {new_id}." in listed, listed
    verify = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                  "--reassignment-json-file", str(plan))
    assert f"Reassignment of partition {topic}-0 is still in progress." in verify, verify
    refused = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                   "--reassignment-json-file", str(plan), check=False)
    assert "Cannot execute because there is an existing partition assignment." in refused

    out = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--cancel",
               "--reassignment-json-file", str(plan))
    assert f"Successfully cancelled partition reassignment for: {topic}-0" in out, out
    # Kafka's revert keeps the original replicas, not their order: the assignment
    # during the move lists the target first and cannot tell the original order
    wait_for(lambda: sorted(cluster.describe(topic)[0]["replicas"]) == sorted(original),
             WAIT_S, "the original replicas back")
    wait_for(lambda: not partition_dirs(new, topic), WAIT_S,
             "the new broker to delete the cancelled replica")
    assert "No partition reassignments found." in tool(
        "reassign-partitions", "--bootstrap-server", bootstrap, "--list")
    assert cluster.isr(topic, 0) == sorted(original)


def test_follower_throttled_reassignment_is_bounded_and_cancelled(
        cluster: Cluster, tmp_path: Path) -> None:
    topic = "throttled"
    _fill(cluster, topic)
    new = add_broker(cluster, 4)
    # the rates come from the tool alone: --throttle sets them as dynamic broker configs
    # (/config/brokers/<id>), and --cancel clears them again
    _throttled_move_then_cancel(cluster, tmp_path, topic, new)
    admin = cluster.admin()
    for broker_id in cluster.brokers:
        resource = ConfigResource("BROKER", str(broker_id))
        entries = admin.describe_configs([resource])[resource].result(WAIT_S)
        rate = entries["follower.replication.throttled.rate"]
        assert rate.value == str(2**63 - 1) and rate.is_default, (broker_id, rate)


def test_leader_throttled_reassignment_is_bounded_and_cancelled(
        leader_throttled_cluster: Cluster, tmp_path: Path) -> None:
    cluster = leader_throttled_cluster
    topic = "leader-throttled"
    _fill(cluster, topic)  # in-sync followers are not throttled: acks=all goes on
    new = add_broker(cluster, 4)
    _throttled_move_then_cancel(cluster, tmp_path, topic, new)


def test_reassignment_requests_are_the_controllers_and_checked(cluster: Cluster) -> None:
    """The controller refuses dead brokers and unknown partitions per partition, and a
    cancel of a partition not moving; a broker that is not the controller forwards the
    request to it and gives its answer (Kafka 4.0 forwards what only its controller
    does; test_controller_forwarding.py)."""
    import anyio

    from pybroker.client.connection import BrokerConnection
    from pybroker.errors import ErrorCode

    topic = "checked"
    cluster.create_topic(topic, 1)
    controller = wait_for(cluster.controller, what="a controller")
    other = next(b for b in cluster.brokers if b != controller)

    def alter(broker_id: int, partitions: list[dict]) -> dict:
        broker = cluster.brokers[broker_id]

        async def send() -> dict:
            connection = BrokerConnection(broker.host, broker.port, "test", WAIT_S)
            try:
                return await connection.request(45, 0, {"timeout_ms": 30000, "topics": [
                    {"name": topic, "partitions": partitions}]})
            finally:
                await connection.close()
        return anyio.run(send)

    for asked in (other, controller):
        answer = alter(asked, [{"partition_index": 0, "replicas": [1, 2, 9]},
                               {"partition_index": 5, "replicas": [1, 2, 3]}])
        assert answer["error_code"] == 0
        codes = [p["error_code"] for p in answer["responses"][0]["partitions"]]
        assert codes == [ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        answer = alter(asked, [{"partition_index": 0, "replicas": None}])
        assert answer["responses"][0]["partitions"][0]["error_code"] == (
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    assert sorted(cluster.describe(topic)[0]["replicas"]) == [1, 2, 3]


def test_a_move_written_to_admin_reassign_partitions_is_carried_out(cluster: Cluster) -> None:
    """Kafka's ZooKeeper way: an operator writes /admin/reassign_partitions; the
    controller starts the moves and removes the znode."""
    topic = "zkmoved"
    cluster.create_topic(topic, 1, replication=2)
    original = cluster.describe(topic)[0]["replicas"]
    spare = next(b for b in sorted(cluster.brokers) if b not in original)
    target = [spare, original[0]]
    cluster.zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target}]}).encode())
    wait_for(lambda: cluster.describe(topic)[0]["replicas"] == target, REASSIGN_S,
             "the move requested in ZooKeeper to complete")
    wait_for(lambda: cluster.zk.exists("/admin/reassign_partitions") is None, WAIT_S,
             "the controller to remove the request")
    wait_for(lambda: not partition_dirs(cluster.brokers[original[1]], topic), WAIT_S,
             f"broker {original[1]} to delete its replica")
    assert sorted(cluster.isr(topic, 0)) == sorted(target)


def test_a_replica_moved_away_while_its_broker_was_down_is_deleted_on_return(
        cluster: Cluster, tmp_path: Path) -> None:
    topic = "stray"
    cluster.create_topic(topic, 1, replication=2)
    original = cluster.describe(topic)[0]["replicas"]
    away = original[1]
    spare = next(b for b in sorted(cluster.brokers) if b not in original)
    assert cluster.brokers[away].stop() == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [original[0], spare]}]}))
    live = [cluster.brokers[b].bootstrap for b in cluster.live()]
    tool("reassign-partitions", "--bootstrap-server", live[0], "--execute",
         "--reassignment-json-file", str(plan))
    wait_for(lambda: "is completed" in tool(
        "reassign-partitions", "--bootstrap-server", live[0], "--verify",
        "--reassignment-json-file", str(plan)), REASSIGN_S, "the move to complete", poll_s=1.0)
    assert partition_dirs(cluster.brokers[away], topic) == {0}  # down: nobody told it
    cluster.restart(away)
    wait_for(lambda: not partition_dirs(cluster.brokers[away], topic), WAIT_S,
             f"broker {away} to delete its stray replica on return")
