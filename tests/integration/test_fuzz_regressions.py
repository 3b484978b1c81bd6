"""Defects the live fuzz run (tests/fuzz/test_live.py) found, each replayed on a raw
socket against a real broker process:

- a SaslAuthenticate on a PLAINTEXT connection closed the connection, so the requests
  pipelined behind it were never answered (Kafka answers ILLEGAL_SASL_STATE and goes on);
- any client's ControlledShutdown marked broker 0 as shutting down (Kafka requires the
  live broker's epoch: STALE_BROKER_EPOCH);
- a TxnOffsetCommit without a producer id (or with an epoch older than the one the
  offsets partition saw) reached the log, whose refusal was logged as an ERROR with a
  traceback and answered COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import time
from typing import Any

from pybroker.errors import ErrorCode
from tests.conftest import Broker, BrokerFactory
from tests.integration.protoclient import ProtoClient

SASL_AUTHENTICATE, METADATA, CONTROLLED_SHUTDOWN, TXN_OFFSET_COMMIT = 36, 3, 7, 28
CREATE_TOPICS, FIND_COORDINATOR = 19, 10
#: bound on waiting for the group coordinator to load __consumer_offsets
COORDINATOR_WAIT_S = 60.0


def test_a_stray_sasl_authenticate_is_answered_and_the_connection_goes_on(
        broker: Broker) -> None:
    with ProtoClient(broker.bootstrap) as client:
        answer = client.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00user\x00pw"})
        assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        # the same connection still serves (it was closed here before the fix)
        metadata = client.request(METADATA, 1, {"topics": []})
        assert [b["node_id"] for b in metadata["brokers"]] == [0]


def test_a_controlled_shutdown_needs_the_live_brokers_epoch(
        broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    with ProtoClient(broker.bootstrap) as client:
        for version, body in ((3, {"broker_id": 0, "broker_epoch": 12345}),
                              (3, {"broker_id": 0, "broker_epoch": 1}),  # a first epoch
                              (2, {"broker_id": 0, "broker_epoch": 0}),
                              (1, {"broker_id": 0})):  # v1 has no epoch at all
            answer = client.request(CONTROLLED_SHUTDOWN, version, body)
            assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH, (version, answer)
            assert answer["remaining_partitions"] == []
        answer = client.request(CONTROLLED_SHUTDOWN, 3, {"broker_id": 7, "broker_epoch": 1})
        assert answer["error_code"] == ErrorCode.BROKER_NOT_AVAILABLE
    # the broker's own request, with its epoch, still goes through when it stops
    assert broker.stop() == 0
    log = broker.log_path.read_text(errors="replace")
    assert "controlled shutdown succeeded" in log
    assert "controller: controlled shutdown of broker 0" in log
    assert log.count("controller: controlled shutdown of broker 0") == 1, log


def test_a_controlled_shutdown_needs_cluster_action_under_an_authorizer(
        broker_factory: BrokerFactory) -> None:
    broker = broker_factory({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false"})
    with ProtoClient(broker.bootstrap) as client:  # User:ANONYMOUS, no ACLs
        answer = client.request(CONTROLLED_SHUTDOWN, 3, {"broker_id": 0, "broker_epoch": 1})
        assert answer["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert broker.stop() == 0  # the broker's own request is not a client's: still done
    assert "controlled shutdown succeeded" in broker.log_path.read_text(errors="replace")


def _txn_offset_commit(client: ProtoClient, version: int, producer_id: int,
                       producer_epoch: int, topic: str) -> list[int]:
    """Per-partition error codes, once the group coordinator has loaded."""
    body: dict[str, Any] = {
        "transactional_id": "fuzzfix-txn", "group_id": "fuzzfix-group",
        "producer_id": producer_id, "producer_epoch": producer_epoch,
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]}
    loading = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
               ErrorCode.NOT_COORDINATOR}
    deadline = time.monotonic() + COORDINATOR_WAIT_S
    while True:
        answer = client.request(TXN_OFFSET_COMMIT, version, body)
        codes = [p["error_code"] for t in answer["topics"] for p in t["partitions"]]
        if not set(codes) & loading or time.monotonic() > deadline:
            return codes
        time.sleep(0.2)


def test_a_txn_offset_commit_without_a_producer_is_refused_before_the_log(
        broker: Broker, topic_name: str) -> None:
    with ProtoClient(broker.bootstrap) as client:
        created = client.request(CREATE_TOPICS, 2, {
            "topics": [{"name": topic_name, "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 10_000, "validate_only": False})
        assert created["topics"][0]["error_code"] == 0
        # the group's coordinator: creates and loads __consumer_offsets
        client.request(FIND_COORDINATOR, 1, {"key": "fuzzfix-group", "key_type": 0})
        assert _txn_offset_commit(client, 3, -1, 0, topic_name) == [
            ErrorCode.INVALID_PRODUCER_ID_MAPPING]
        assert _txn_offset_commit(client, 0, -2**63, 0, topic_name) == [
            ErrorCode.INVALID_PRODUCER_ID_MAPPING]
        # a negative epoch: INVALID_PRODUCER_EPOCH, PRODUCER_FENCED for v3 clients
        assert _txn_offset_commit(client, 2, 1000, -1, topic_name) == [
            ErrorCode.INVALID_PRODUCER_EPOCH]
        assert _txn_offset_commit(client, 3, 1000, -5, topic_name) == [
            ErrorCode.PRODUCER_FENCED]
        # an epoch older than the one the offsets partition saw for that producer: the
        # log's producer state refuses it, and the client gets the fencing error
        assert _txn_offset_commit(client, 2, 2000, 7, topic_name) == [ErrorCode.NONE]
        assert _txn_offset_commit(client, 2, 2000, 3, topic_name) == [
            ErrorCode.INVALID_PRODUCER_EPOCH]
        assert _txn_offset_commit(client, 3, 2000, 3, topic_name) == [
            ErrorCode.PRODUCER_FENCED]
    log = broker.log_path.read_text(errors="replace")
    assert " ERROR " not in log and "Traceback" not in log
