"""Kafka's system-test clients (kafka-verifiable-producer.sh / kafka-verifiable-consumer.sh)
against a 3-broker pybroker cluster on ZooKeeper, through a kill -9 of a broker and a
rolling restart of all three, with the classic and the consumer (KIP-848) group
protocols: every record the producer saw acknowledged (acks=all, min.insync.replicas=2)
is consumed, counted value by value. Skipped without KAFKA_HOME."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.cluster.cluster import Cluster
from tests.java.kafka import App, app, json_events, requires_kafka, wait_until, write_properties

pytestmark = [requires_kafka, pytest.mark.timeout(600)]

TOPIC = "verifiable"
PARTITIONS = 3
MESSAGES = 4000
THROUGHPUT = 150  # records/s: production spans the broker faults below


def acked_values(producer_log: Path) -> set[str]:
    return {e["value"] for e in json_events(producer_log)
            if e.get("name") == "producer_send_success"}


def consumed_values(consumer_log: Path) -> list[str]:
    return [e["value"] for e in json_events(consumer_log) if e.get("name") == "record_data"]


def rolling_restart(cluster: Cluster) -> None:
    """Stop (SIGTERM: controlled shutdown) and start each broker in turn, waiting for
    the partitions to have full ISRs again before the next one."""
    for broker_id in sorted(cluster.brokers):
        cluster.brokers[broker_id].stop()
        cluster.restart(broker_id)
        cluster.wait_full_isr(TOPIC, PARTITIONS, timeout_s=90)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_every_acked_record_consumed_through_kill_and_rolling_restart(
        cluster: Cluster, tmp_path: Path, protocol: str) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    bootstrap = cluster.bootstrap
    producer_props = write_properties(tmp_path / "producer.properties", {
        # the tool sets retries=0 (its "no retries" default); the file overrides it
        "enable.idempotence": "true", "retries": "2147483647", "delivery.timeout.ms": "120000",
        "request.timeout.ms": "10000", "linger.ms": "5"})
    consumer_props = write_properties(tmp_path / "consumer.properties", {
        "request.timeout.ms": "10000"})
    producer = app("kafka-verifiable-producer.sh", "--topic", TOPIC, "--bootstrap-server",
                   bootstrap, "--max-messages", str(MESSAGES), "--throughput",
                   str(THROUGHPUT), "--acks", "-1", "--producer.config", str(producer_props),
                   log_path=tmp_path / "producer.out")
    consumer = app("kafka-verifiable-consumer.sh", "--topic", TOPIC, "--bootstrap-server",
                   bootstrap, "--group-id", f"verifiable-{protocol}", "--group-protocol",
                   protocol, "--reset-policy", "earliest", "--verbose",
                   "--consumer.config", str(consumer_props),
                   log_path=tmp_path / "consumer.out")
    running: list[App] = [consumer.start(), producer.start()]
    try:
        wait_until(lambda: len(acked_values(producer.log_path)) >= 300, 90,
                   "the producer's first acks", on_timeout=producer.log_tail)
        cluster.kill(2)
        time.sleep(3)  # production goes on with two of three replicas
        cluster.restart(2)
        cluster.wait_full_isr(TOPIC, PARTITIONS, timeout_s=90)
        rolling_restart(cluster)

        assert producer.wait(300) == 0, producer.log_tail()
        acked = acked_values(producer.log_path)
        failed = [e for e in json_events(producer.log_path)
                  if e.get("name") == "producer_send_error"]
        # acks=all with idempotence and two-minute delivery timeout: nothing may fail
        assert not failed, failed[:5]
        assert len(acked) == MESSAGES

        def missing() -> set[str]:
            return acked - set(consumed_values(consumer.log_path))
        wait_until(lambda: not missing(), 180, "every acked record to be consumed",
                   on_timeout=lambda: f"{len(missing())} missing, e.g. "
                                      f"{sorted(missing(), key=int)[:10]}\n"
                                      + consumer.log_tail(20))
    finally:
        for proc in running:
            proc.stop()
    consumed = consumed_values(consumer.log_path)
    assert set(consumed) == acked
    assert consumer.log_path.read_text().count('"name":"shutdown_complete"') == 1
