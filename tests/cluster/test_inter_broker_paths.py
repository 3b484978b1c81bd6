"""Every broker-to-broker path over a secured inter-broker listener, on a cluster
configured as Kafka operators do: the brokers talk to each other on INTERNAL
(SASL_SSL, PLAIN, the credentials of the listener's JAAS line), an ACL authorizer
with the brokers' principal as super user, clients on PLAINTEXT with ACLs on topics,
transactional ids and groups but nothing on the cluster.

The transaction coordinator writes its markers to partition leaders on other
brokers (WriteTxnMarkers) and a stopping broker asks the controller to move its
leaderships (ControlledShutdown): both must authenticate as the broker, as the
replica fetcher does, or a commit never completes and a SIGTERM ends in an
unclean shutdown. The client principal, lacking CLUSTER_ACTION, is still refused
both requests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from pybroker.client.connection import BrokerConnection
from pybroker.errors import ErrorCode
from tests.cluster.cluster import WAIT_S, Cluster, java_string_hash, wait_for
from tests.cluster.zookeeper import ZooKeeperServer
from tests.conftest import free_port
from tests.security.certs import KEY_PASSWORD, Pki, make_pki
from tests.transaction.txnclients import read_all

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="broker" password="broker-pw" user_broker="broker-pw";')
STATE_TOPIC = "__transaction_state"
STATE_PARTITIONS = 3
TOPIC = "ib-txn"
PARTITIONS = 3
PER_PARTITION = 20
#: the clients' principal on the PLAINTEXT listener
CLIENT = "User:ANONYMOUS"


def _internal(cluster: Cluster, broker_id: int) -> str:
    listeners = str(cluster.brokers[broker_id].overrides["listeners"])
    return listeners.split("INTERNAL://", 1)[1]


def _super_admin(cluster: Cluster, pki: Pki, broker_id: int) -> AdminClient:
    """An admin client as the brokers' principal (a super user) on INTERNAL."""
    return AdminClient({"bootstrap.servers": _internal(cluster, broker_id),
                        "security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca),
                        "sasl.mechanism": "PLAIN", "sasl.username": "broker",
                        "sasl.password": "broker-pw"})


@pytest.fixture
def secured(zookeeper: ZooKeeperServer, tmp_path: Path, request: Any
            ) -> Iterator[tuple[Cluster, Pki]]:
    pki = make_pki(tmp_path / "pki")
    cluster = Cluster(zookeeper, tmp_path / "cluster", size=3, overrides={
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore),
        "ssl.key.password": KEY_PASSWORD, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker", "allow.everyone.if.no.acl.found": "false",
        "transaction.state.log.num.partitions": STATE_PARTITIONS,
        "controlled.shutdown.max.retries": 1,
    })
    for broker in cluster.brokers.values():
        broker.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{broker.port},"
                                         f"INTERNAL://127.0.0.1:{free_port()}")
    request.node._pybroker_brokers = list(cluster.brokers.values())
    try:
        cluster.start()
        _grant_clients(cluster, pki)
        yield cluster, pki
    finally:
        cluster.close()


def _grant_clients(cluster: Cluster, pki: Pki) -> None:
    """ALL on every topic, transactional id and group for the clients; nothing on the
    cluster. Waits until every broker's authorizer has them."""
    bindings = [AclBinding(rtype, "*", ResourcePatternType.LITERAL, CLIENT, "*",
                           AclOperation.ALL, AclPermissionType.ALLOW)
                for rtype in (ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID,
                              ResourceType.GROUP)]
    admin = _super_admin(cluster, pki, 1)  # held: its futures end with it
    for future in admin.create_acls(bindings).values():
        future.result(WAIT_S)
    wanted = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, CLIENT, None,
                              AclOperation.ANY, AclPermissionType.ANY)
    for broker_id in cluster.brokers:
        admin = _super_admin(cluster, pki, broker_id)
        wait_for(lambda a=admin: len(a.describe_acls(wanted).result(WAIT_S)) == len(bindings),
                 what=f"broker {broker_id} to know the clients' ACLs")


def _state_partition(transactional_id: str) -> int:
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % STATE_PARTITIONS


def test_markers_reach_leaders_on_other_brokers(secured: tuple[Cluster, Pki]) -> None:
    cluster, _ = secured
    cluster.create_topic(TOPIC, PARTITIONS, replication=3)
    txn_id = f"ib-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5})
    producer.init_transactions(WAIT_S)
    coordinator = cluster.leader(STATE_TOPIC, _state_partition(txn_id))
    leaders = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
    remote = [p for p, leader in leaders.items() if leader != coordinator]
    assert remote, f"every partition led by the coordinator {coordinator}: {leaders}"
    producer.begin_transaction()
    sent = [f"{p}-{i}".encode() for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    for value in sent:
        producer.produce(TOPIC, value, partition=int(value.split(b"-")[0]))
    producer.commit_transaction(WAIT_S)
    # read_committed readers get past the transaction only once its COMMIT marker is
    # in each partition: those led elsewhere got it through WriteTxnMarkers
    got = read_all(cluster.bootstrap, TOPIC, list(range(PARTITIONS)), "read_committed",
                   until=lambda out: len(out) >= len(sent))
    assert sorted(got) == sorted(sent)


def test_controlled_shutdown_reaches_the_controller(secured: tuple[Cluster, Pki]) -> None:
    cluster, _ = secured
    topic = "ib-shutdown"
    cluster.create_topic(topic, 6, replication=3)
    controller = cluster.controller()
    stopping = next(b for b in sorted(cluster.brokers) if b != controller
                    and any(cluster.leader(topic, p) == b for p in range(6)))
    led = [p for p in range(6) if cluster.leader(topic, p) == stopping]
    broker = cluster.brokers[stopping]
    assert broker.stop() == 0
    log = broker.log_path.read_text().rsplit("===== start", 1)[-1]
    assert "controlled shutdown succeeded" in log
    assert "unclean shutdown" not in log
    for p in led:
        assert cluster.leader(topic, p) not in (stopping, -1)


def _cluster_request(port: int, api_key: int, version: int, body: dict[str, Any]
                     ) -> dict[str, Any]:
    async def call() -> dict[str, Any]:
        connection = BrokerConnection("127.0.0.1", port, "not-a-broker", WAIT_S)
        try:
            return await connection.request(api_key, version, body)
        finally:
            await connection.close()
    return anyio.run(call)


def test_clients_without_cluster_action_are_refused(secured: tuple[Cluster, Pki]) -> None:
    """The paths the brokers use stay closed to a principal without CLUSTER_ACTION."""
    cluster, _ = secured
    cluster.create_topic(TOPIC, 1, replication=3)
    controller = cluster.controller()
    assert controller is not None
    port = cluster.brokers[controller].port
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    answer = _cluster_request(port, 7, 3, {"broker_id": 2, "broker_epoch": -1})
    assert answer["error_code"] == denied
    leader = cluster.brokers[cluster.leader(TOPIC, 0)].port
    answer = _cluster_request(leader, 27, 1, {"markers": [{
        "producer_id": 1, "producer_epoch": 0, "transaction_result": True,
        "coordinator_epoch": 0, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]})
    codes = [part["error_code"] for marker in answer["markers"]
             for topic in marker["topics"] for part in topic["partitions"]]
    assert codes == [denied]
