"""Clients are never sent to a dead controller: every broker names itself as the
controller in Metadata and DescribeCluster (Kafka 4.0 names a live broker, never its
controller) and forwards the controller's APIs to the one elected.

librdkafka's admin client sends DescribeConfigs, CreateTopics, ElectLeaders and the
reassignment APIs to the broker Metadata names as controller. Named a controller that
has just been killed, it waited for that broker to come back until its request timed
out (30 s), even after the cluster elected another: the README's local-cluster
walk-through (`kill 1`, then `topics --describe`) failed that way."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from pybroker.errors import ErrorCode
from pybroker.tools._wire import WireClient
from tests.cluster.cluster import Cluster, wait_for
from tests.cluster.zookeeper import ZooKeeperServer

#: far below the 30 s the old answer cost, far above a forward's few milliseconds
ANSWER_BOUND_S = 15.0


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    cluster = Cluster(zookeeper, tmp_path_factory.mktemp("forwarding"))
    request.node._pybroker_brokers = list(cluster.brokers.values())
    try:
        cluster.start()
        cluster.create_topic("forwarded", 3)
        yield cluster
    finally:
        cluster.close()


def other_than_controller(cluster: Cluster) -> int:
    controller = wait_for(cluster.controller, what="a controller")
    return next(b for b in sorted(cluster.brokers) if b != controller)


def test_a_broker_names_itself_and_forwards_what_only_the_controller_does(
        cluster: Cluster) -> None:
    asked = other_than_controller(cluster)
    bootstrap = cluster.brokers[asked].bootstrap
    with WireClient(bootstrap, 10000) as client:
        described = client.request(60, {"include_cluster_authorized_operations": False})
        assert described["controller_id"] == asked
        # ListPartitionReassignments and ElectLeaders only the controller serves: the
        # broker asked takes them there (before: NOT_CONTROLLER)
        listed = client.request(46, {"timeout_ms": 10000, "topics": None}, node=asked)
        assert listed["error_code"] == 0, listed
        elected = client.request(43, {"election_type": 0, "timeout_ms": 10000,
                                      "topic_partitions": [{"topic": "forwarded",
                                                            "partitions": [0, 1, 2]}]},
                                 node=asked)
        assert elected.get("error_code", 0) == 0, elected
        codes = {p["error_code"] for t in elected["replica_election_results"]
                 for p in t["partition_result"]}
        assert codes == {ErrorCode.ELECTION_NOT_NEEDED}, elected
        # Metadata too, asked of that broker itself (librdkafka's list_topics may ask any
        # broker it learned of, or answer from its cache)
        metadata = client.request(3, {"topics": [], "allow_auto_topic_creation": False},
                                  node=asked)
        assert metadata["controller_id"] == asked


def test_an_admin_request_right_after_the_controller_is_killed_is_answered(
        cluster: Cluster) -> None:
    asked = other_than_controller(cluster)
    controller = cluster.controller()
    assert controller is not None

    def naming_another() -> tuple[AdminClient] | None:
        # connected, and its metadata cached, before the kill. librdkafka may take its
        # metadata from any broker it learned of (and answer later asks from its
        # cache), and the answering broker names itself: the controller is about to
        # die, so the client used holds another broker's answer. The old code never gave
        # one (every broker named the controller), so this wait fails there
        admin = AdminClient({"bootstrap.servers": cluster.brokers[asked].bootstrap})
        named = admin.list_topics(timeout=10).controller_id
        # (in a tuple: a client object is falsy, it has a length)
        return (admin,) if named not in (None, -1, controller) else None
    admin, = wait_for(naming_another,
                      what="a client whose metadata names a broker other than the controller")
    cluster.kill(controller)
    started = time.monotonic()
    resource = ConfigResource(ResourceType.TOPIC, "forwarded")
    configs = admin.describe_configs([resource], request_timeout=30)[resource].result(
        timeout=ANSWER_BOUND_S)
    assert "min.insync.replicas" in configs
    assert time.monotonic() - started < ANSWER_BOUND_S
