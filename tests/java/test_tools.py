"""Kafka's own command-line tools (bin/kafka-*.sh of a stock distribution, the Java
AdminClient, producer and consumer underneath) against one pybroker: exit codes and
output as Kafka's broker would give them. Skipped without KAFKA_HOME."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.conftest import Broker, BrokerFactory
from tests.java.kafka import requires_kafka, tool, wait_until

pytestmark = [requires_kafka, pytest.mark.timeout(300)]

#: `kafka-topics.sh --describe` partition line (4.0 prints Elr/LastKnownElr too)
PARTITION_LINE = re.compile(
    r"^\tTopic: (?P<topic>\S+)\tPartition: (?P<p>\d+)\tLeader: (?P<leader>-?\d+)"
    r"\tReplicas: (?P<replicas>[\d,]*)\tIsr: (?P<isr>[\d,]*)")


def new_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    """counts[p] records into partition p, acked by the broker."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors: list[object] = []
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(topic, key=f"k{i}", value=f"p{partition}-{i}", partition=partition,
                             on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert producer.flush(60) == 0
    assert not errors


def describe(bootstrap: str, topic: str) -> tuple[str, dict[int, dict[str, str]]]:
    result = tool("kafka-topics.sh", "--bootstrap-server", bootstrap, "--describe",
                  "--topic", topic).ok()
    partitions = {}
    for line in result.stdout.splitlines():
        match = PARTITION_LINE.match(line)
        if match:
            partitions[int(match["p"])] = match.groupdict()
    header = result.stdout.splitlines()[0]
    return header, partitions


def test_topics_create_list_describe_alter_delete(broker: Broker) -> None:
    b = broker.bootstrap
    topic = new_topic("tools-topics")
    created = tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
                   "--partitions", "3", "--replication-factor", "1",
                   "--config", "retention.ms=123456").ok()
    assert created.stdout.strip() == f"Created topic {topic}."

    again = tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
                 "--partitions", "3")
    assert again.returncode == 1
    assert f"Topic '{topic}' already exists." in again.output

    assert topic in tool("kafka-topics.sh", "--bootstrap-server", b, "--list").ok().lines()

    header, partitions = describe(b, topic)
    assert header.startswith(f"Topic: {topic}\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\t" in header
    assert "retention.ms=123456" in header
    assert sorted(partitions) == [0, 1, 2]
    for p in partitions.values():
        assert p["leader"] == "0" and p["replicas"] == "0" and p["isr"] == "0"

    tool("kafka-topics.sh", "--bootstrap-server", b, "--alter", "--topic", topic,
         "--partitions", "5").ok()
    _, partitions = describe(b, topic)
    assert sorted(partitions) == [0, 1, 2, 3, 4]

    fewer = tool("kafka-topics.sh", "--bootstrap-server", b, "--alter", "--topic", topic,
                 "--partitions", "2")
    assert fewer.returncode == 1
    assert "InvalidPartitionsException" in fewer.output

    tool("kafka-topics.sh", "--bootstrap-server", b, "--delete", "--topic", topic).ok()
    wait_until(lambda: topic not in tool("kafka-topics.sh", "--bootstrap-server", b,
                                         "--list").ok().lines(), 60, f"{topic} to go")
    missing = tool("kafka-topics.sh", "--bootstrap-server", b, "--describe", "--topic", topic)
    assert missing.returncode == 1
    # (this 4.0 snapshot prints the name as Optional[...]; the check is the same)
    assert "does not exist as expected" in missing.output and topic in missing.output


def test_console_producer_consumer_keys_and_offsets(broker: Broker) -> None:
    b = broker.bootstrap
    topic = new_topic("tools-console")
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--partitions", "1").ok()
    lines = [f"key{i}:value {i}" for i in range(50)]
    tool("kafka-console-producer.sh", "--bootstrap-server", b, "--topic", topic,
         "--property", "parse.key=true", "--property", "key.separator=:",
         "--producer-property", "acks=all", stdin="\n".join(lines) + "\n").ok()
    consumed = tool("kafka-console-consumer.sh", "--bootstrap-server", b, "--topic", topic,
                    "--from-beginning", "--max-messages", "50", "--timeout-ms", "60000",
                    "--property", "print.key=true", "--property", "print.offset=true",
                    "--property", "key.separator=:").ok()
    assert consumed.lines() == [f"Offset:{i}:key{i}:value {i}" for i in range(50)]
    assert "Processed a total of 50 messages" in consumed.stderr

    # --partition/--offset read from the middle, as Kafka's broker serves it
    tail = tool("kafka-console-consumer.sh", "--bootstrap-server", b, "--topic", topic,
                "--partition", "0", "--offset", "45", "--max-messages", "5",
                "--timeout-ms", "60000").ok()
    assert tail.lines() == [f"value {i}" for i in range(45, 50)]


def test_get_offsets_and_delete_records(broker: Broker, tmp_path: Path) -> None:
    b = broker.bootstrap
    topic = new_topic("tools-offsets")
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--partitions", "2").ok()
    produce(b, topic, {0: 30, 1: 7})
    latest = tool("kafka-get-offsets.sh", "--bootstrap-server", b, "--topic", topic).ok()
    assert sorted(latest.lines()) == [f"{topic}:0:30", f"{topic}:1:7"]

    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": 12}]}))
    deleted = tool("kafka-delete-records.sh", "--bootstrap-server", b,
                   "--offset-json-file", str(plan)).ok()
    assert f"partition: {topic}-0\tlow_watermark: 12" in deleted.stdout
    earliest = tool("kafka-get-offsets.sh", "--bootstrap-server", b, "--topic", topic,
                    "--time", "earliest").ok()
    assert sorted(earliest.lines()) == [f"{topic}:0:12", f"{topic}:1:0"]

    # beyond the high watermark: Kafka answers OFFSET_OUT_OF_RANGE for that partition
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 1, "offset": 99}]}))
    beyond = tool("kafka-delete-records.sh", "--bootstrap-server", b,
                  "--offset-json-file", str(plan))
    assert f"partition: {topic}-1\terror: " in beyond.stdout
    assert "OffsetOutOfRangeException" in beyond.stdout


def test_consumer_groups_list_describe_reset_delete(broker: Broker) -> None:
    b = broker.bootstrap
    topic = new_topic("tools-groups")
    group = new_topic("tools-group")
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--partitions", "2").ok()
    produce(b, topic, {0: 10, 1: 4})
    tool("kafka-console-consumer.sh", "--bootstrap-server", b, "--topic", topic,
         "--group", group, "--max-messages", "14", "--timeout-ms", "60000").ok()

    assert group in tool("kafka-consumer-groups.sh", "--bootstrap-server", b,
                         "--list").ok().lines()

    def offsets() -> dict[int, tuple[str, str, str]]:
        out = tool("kafka-consumer-groups.sh", "--bootstrap-server", b, "--describe",
                   "--group", group).ok().stdout
        rows = {}
        for line in out.splitlines():
            cols = line.split()
            if len(cols) >= 6 and cols[0] == group and cols[1] == topic:
                rows[int(cols[2])] = (cols[3], cols[4], cols[5])
        return rows

    assert offsets() == {0: ("10", "10", "0"), 1: ("4", "4", "0")}

    dry = tool("kafka-consumer-groups.sh", "--bootstrap-server", b, "--reset-offsets",
               "--group", group, "--topic", topic, "--to-offset", "3", "--dry-run").ok()
    assert re.search(rf"{re.escape(group)}\s+{re.escape(topic)}\s+0\s+3\b", dry.stdout)
    assert offsets() == {0: ("10", "10", "0"), 1: ("4", "4", "0")}  # dry run: unchanged

    tool("kafka-consumer-groups.sh", "--bootstrap-server", b, "--reset-offsets",
         "--group", group, "--topic", topic, "--to-earliest", "--execute").ok()
    assert offsets() == {0: ("0", "10", "10"), 1: ("0", "4", "4")}
    tool("kafka-consumer-groups.sh", "--bootstrap-server", b, "--reset-offsets",
         "--group", group, "--topic", f"{topic}:0", "--shift-by", "7", "--execute").ok()
    assert offsets() == {0: ("7", "10", "3"), 1: ("0", "4", "4")}

    state = tool("kafka-consumer-groups.sh", "--bootstrap-server", b, "--describe",
                 "--group", group, "--state").ok()
    row = next(ln.split() for ln in state.lines() if ln.startswith(group + " "))
    assert row[-2:] == ["Empty", "0"], state.stdout  # STATE, #MEMBERS

    deleted = tool("kafka-consumer-groups.sh", "--bootstrap-server", b, "--delete",
                   "--group", group).ok()
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted.stdout
    assert group not in tool("kafka-consumer-groups.sh", "--bootstrap-server", b,
                             "--list").ok().lines()
    again = tool("kafka-consumer-groups.sh", "--bootstrap-server", b, "--delete",
                 "--group", group)
    assert "GroupIdNotFoundException" in again.output


def test_broker_api_versions_and_cluster_id(broker: Broker) -> None:
    b = broker.bootstrap
    versions = tool("kafka-broker-api-versions.sh", "--bootstrap-server", b).ok().stdout
    assert versions.splitlines()[0].startswith(f"{b} (id: 0 rack: null) -> (")
    # the Java client finds a usable version of every API it needs against pybroker
    for api in ("Produce(0)", "Fetch(1)", "ListOffsets(2)", "Metadata(3)", "OffsetCommit(8)",
                "FindCoordinator(10)", "JoinGroup(11)", "ApiVersions(18)", "CreateTopics(19)",
                "InitProducerId(22)", "DescribeConfigs(32)", "DescribeCluster(60)",
                "DescribeTopicPartitions(75)"):
        line = next((ln for ln in versions.splitlines() if ln.strip().startswith(api + ":")), "")
        assert re.search(r": \d+( to \d+)? \[usable: \d+\]", line), (api, line)

    cluster_id = tool("kafka-cluster.sh", "cluster-id", "--bootstrap-server", b).ok()
    match = re.fullmatch(r"Cluster ID: (\S+)", cluster_id.stdout.strip())
    assert match
    admin = AdminClient({"bootstrap.servers": b})
    described = admin.describe_cluster().result(30)
    assert match[1] == described.cluster_id


def test_log_dirs(broker: Broker) -> None:
    b = broker.bootstrap
    topic = new_topic("tools-logdirs")
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--partitions", "2").ok()
    produce(b, topic, {0: 20})
    out = tool("kafka-log-dirs.sh", "--bootstrap-server", b, "--describe",
               "--topic-list", topic).ok()
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["version"] == 1
    [entry] = doc["brokers"]
    assert entry["broker"] == 0
    [log_dir] = entry["logDirs"]
    assert log_dir["error"] is None and log_dir["logDir"] == str(broker.data_dir)
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    assert set(sizes) == {f"{topic}-0", f"{topic}-1"}
    assert sizes[f"{topic}-0"] > 0 and sizes[f"{topic}-1"] == 0


def test_perf_tests_and_e2e_latency(broker: Broker) -> None:
    b = broker.bootstrap
    topic = new_topic("tools-perf")
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--partitions", "2").ok()
    produced = tool("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", "5000",
                    "--record-size", "100", "--throughput", "-1", "--producer-props",
                    f"bootstrap.servers={b}", "acks=all").ok()
    assert re.search(r"^5000 records sent, ", produced.stdout, re.M), produced.stdout
    consumed = tool("kafka-consumer-perf-test.sh", "--bootstrap-server", b, "--topic", topic,
                    "--messages", "5000", "--timeout", "60000").ok()
    row = consumed.lines()[-1].split(", ")
    assert row[4] == "5000", consumed.stdout  # data.consumed.in.nMsg
    latency = tool("kafka-e2e-latency.sh", b, topic, "200", "all", "100").ok()
    assert "Avg latency:" in latency.stdout
    offsets = Consumer({"bootstrap.servers": b, "group.id": "unused"})
    try:
        total = sum(offsets.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                    for p in (0, 1))
    finally:
        offsets.close()
    assert total == 5200


def test_transactions_list_describe(broker: Broker) -> None:
    b = broker.bootstrap
    topic = new_topic("tools-txn")
    txn_id = new_topic("tools-txn-id")
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--partitions", "1").ok()
    producer = Producer({"bootstrap.servers": b, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open")
    assert producer.flush(30) == 0
    try:
        listed = tool("kafka-transactions.sh", "--bootstrap-server", b, "list").ok()
        assert listed.lines()[0].split() == ["TransactionalId", "Coordinator", "ProducerId",
                                             "TransactionState"]
        row = next(ln.split() for ln in listed.lines() if ln.startswith(txn_id))
        assert row[1] == "0" and row[3] == "Ongoing"
        described = tool("kafka-transactions.sh", "--bootstrap-server", b, "describe",
                         "--transactional-id", txn_id).ok()
        fields = [f.strip() for f in described.lines()[1].split("\t")]
        assert fields[0] == "0" and fields[1] == txn_id and fields[2] == row[2]
        assert "Ongoing" in fields
        assert f"{topic}-0" in described.lines()[1]
        producers = tool("kafka-transactions.sh", "--bootstrap-server", b, "describe-producers",
                         "--topic", topic, "--partition", "0").ok()
        assert any(ln.split()[0] == row[2] for ln in producers.lines()[1:]), producers.stdout
    finally:
        producer.commit_transaction(30)
    committed = tool("kafka-transactions.sh", "--bootstrap-server", b, "describe",
                     "--transactional-id", txn_id).ok()
    assert "CompleteCommit" in committed.stdout or "Empty" in committed.stdout


def test_leader_election_and_features_single(broker: Broker) -> None:
    b = broker.bootstrap
    topic = new_topic("tools-elect")
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--partitions", "1").ok()
    elected = tool("kafka-leader-election.sh", "--bootstrap-server", b, "--election-type",
                   "preferred", "--topic", topic, "--partition", "0").ok()
    assert f"Valid replica already elected for partitions {topic}-0" in elected.stdout
    tool("kafka-features.sh", "--bootstrap-server", b, "describe").ok()


def test_configs_tool(broker: Broker) -> None:
    b = broker.bootstrap
    topic = new_topic("tools-configs")
    tool("kafka-topics.sh", "--bootstrap-server", b, "--create", "--topic", topic,
         "--partitions", "1").ok()
    altered = tool("kafka-configs.sh", "--bootstrap-server", b, "--alter", "--entity-type",
                   "topics", "--entity-name", topic, "--add-config",
                   "retention.ms=777777,cleanup.policy=compact")
    if "Could not find or load main class" in altered.output:
        pytest.skip("this Kafka distribution has no kafka.admin.ConfigCommand (Scala core)")
    assert altered.ok().stdout.strip() == f"Completed updating config for topic {topic}."
    described = tool("kafka-configs.sh", "--bootstrap-server", b, "--describe",
                     "--entity-type", "topics", "--entity-name", topic).ok()
    assert described.lines()[0] == f"Dynamic configs for topic {topic} are:"
    entries = {ln.split("=", 1)[0].strip(): ln.strip() for ln in described.lines()[1:]}
    assert set(entries) == {"retention.ms", "cleanup.policy"}
    assert entries["retention.ms"].startswith(
        "retention.ms=777777 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=777777")
    tool("kafka-configs.sh", "--bootstrap-server", b, "--alter", "--entity-type", "topics",
         "--entity-name", topic, "--delete-config", "cleanup.policy").ok()
    after = tool("kafka-configs.sh", "--bootstrap-server", b, "--describe",
                 "--entity-type", "topics", "--entity-name", topic).ok()
    assert [ln.split("=", 1)[0].strip() for ln in after.lines()[1:]] == ["retention.ms"]

    bad = tool("kafka-configs.sh", "--bootstrap-server", b, "--alter", "--entity-type",
               "topics", "--entity-name", topic, "--add-config", "retention.ms=notanumber")
    assert bad.returncode == 1
    assert "InvalidConfigurationException" in bad.output or "Invalid value" in bad.output

    # a dynamic broker config (per-broker) and the default-broker entity
    tool("kafka-configs.sh", "--bootstrap-server", b, "--alter", "--entity-type", "brokers",
         "--entity-name", "0", "--add-config", "log.cleaner.threads=2").ok()
    brokers = tool("kafka-configs.sh", "--bootstrap-server", b, "--describe",
                   "--entity-type", "brokers", "--entity-name", "0").ok()
    assert brokers.lines()[0] == "Dynamic configs for broker 0 are:"
    assert any(ln.strip().startswith("log.cleaner.threads=2 sensitive=false synonyms="
                                     "{DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2")
               for ln in brokers.lines()[1:]), brokers.stdout
    tool("kafka-configs.sh", "--bootstrap-server", b, "--alter", "--entity-type", "brokers",
         "--entity-name", "0", "--delete-config", "log.cleaner.threads").ok()


def test_acls_tool(broker_factory: BrokerFactory) -> None:
    # PLAINTEXT clients are User:ANONYMOUS, made super user so that it may manage ACLs
    broker = broker_factory({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    b = broker.bootstrap
    listed = tool("kafka-acls.sh", "--bootstrap-server", b, "--list")
    if "Could not find or load main class" in listed.output:
        pytest.skip("this Kafka distribution has no kafka.admin.AclCommand (Scala core)")
    assert listed.ok().stdout.strip() == ""
    tool("kafka-acls.sh", "--bootstrap-server", b, "--add", "--allow-principal", "User:alice",
         "--operation", "Read", "--operation", "Describe", "--topic", "orders").ok()
    tool("kafka-acls.sh", "--bootstrap-server", b, "--add", "--allow-principal", "User:alice",
         "--operation", "Read", "--group", "billing-", "--resource-pattern-type",
         "prefixed").ok()
    out = tool("kafka-acls.sh", "--bootstrap-server", b, "--list", "--topic", "orders").ok()
    assert ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
            "patternType=LITERAL)`:") in out.stdout
    assert sorted(ln.strip() for ln in out.lines()[1:]) == [
        "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"]
    by_principal = tool("kafka-acls.sh", "--bootstrap-server", b, "--list", "--principal",
                        "User:alice").ok()
    assert "name=billing-, patternType=PREFIXED" in by_principal.stdout
    tool("kafka-acls.sh", "--bootstrap-server", b, "--remove", "--force", "--allow-principal",
         "User:alice", "--operation", "Read", "--topic", "orders").ok()
    out = tool("kafka-acls.sh", "--bootstrap-server", b, "--list", "--topic", "orders").ok()
    assert [ln.strip() for ln in out.lines()[1:]] == [
        "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)"]

    # without an authorizer the broker answers SECURITY_DISABLED, as Kafka's
    plain = broker_factory()
    disabled = tool("kafka-acls.sh", "--bootstrap-server", plain.bootstrap, "--list")
    assert disabled.returncode == 1
    assert "SecurityDisabledException: No Authorizer is configured" in disabled.output
