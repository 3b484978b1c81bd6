"""Issue 15's describe and configure tools against a live 3-broker cluster on a real
ZooKeeper: DescribeCluster, `pybroker log-dirs`, `pybroker configs` (topics, and dynamic
broker configs applied on every broker without a restart), `pybroker get-offsets` and
`pybroker delete-records`, each checked for Kafka's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.cluster.cluster import Cluster, wait_for
from tests.cluster.zookeeper import ZooKeeperServer

TOOL_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def tools_cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """One cluster for the module's tests (each uses its own topics)."""
    cluster = Cluster(zookeeper, tmp_path_factory.mktemp("tools-cluster"))
    request.node._pybroker_brokers = list(cluster.brokers.values())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def tool(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "pybroker", *args], capture_output=True,
                            text=True, timeout=TOOL_TIMEOUT_S,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if check:
        assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result


def produce(cluster: Cluster, topic: str, counts: dict[int, int], batch: int = 10000,
            in_flight: int = 5) -> None:
    """`counts[p]` records of 100 bytes into partition p, acks=all, at most `batch`
    records per batch and `in_flight` requests in flight per connection."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 5, "batch.num.messages": batch,
                         "max.in.flight.requests.per.connection": in_flight})
    failures: list[object] = []
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=b"v" * 100, key=str(i).encode(), partition=partition,
                             on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(60) == 0
    assert not failures


def test_describe_cluster(tools_cluster: Cluster) -> None:
    from pybroker.tools._wire import WireClient

    with WireClient(tools_cluster.brokers[1].bootstrap, 10000) as client:
        answer = client.request(60, {"include_cluster_authorized_operations": False})
    assert answer["error_code"] == 0
    assert sorted(b["broker_id"] for b in answer["brokers"]) == [1, 2, 3]
    assert {(b["host"], b["port"]) for b in answer["brokers"]} == {
        (b.host, b.port) for b in tools_cluster.brokers.values()}
    # a live broker, the one asked (Kafka 4.0 names a live broker, never its controller;
    # the broker forwards the controller's APIs: test_controller_forwarding.py)
    assert answer["controller_id"] == 1
    data, _ = tools_cluster.zk.get("/cluster/id")
    assert answer["cluster_id"] == json.loads(data)["id"]


def test_log_dirs(tools_cluster: Cluster) -> None:
    tools_cluster.create_topic("dirs", 2)
    tools_cluster.create_topic("dirs-other", 1)
    produce(tools_cluster, "dirs", {0: 20, 1: 0})
    wait_for(lambda: all(
        len(tools_cluster.log_bytes(b, "dirs", 0)) > 2000 for b in tools_cluster.brokers),
        what="every replica of dirs-0 to have the records")
    out = tool("log-dirs", "--bootstrap-server", tools_cluster.bootstrap, "--describe",
               "--topic-list", "dirs", "--json").stdout.splitlines()
    assert out[0] == "Querying brokers for log directories information"
    assert out[1] == "Received log directory information from brokers 1,2,3"
    assert len(out) == 3
    assert '"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":' in out[2]  # Kafka's order
    document = json.loads(out[2])
    for entry in document["brokers"]:
        broker = entry["broker"]
        [log_dir] = entry["logDirs"]
        assert log_dir["logDir"] == str(tools_cluster.brokers[broker].data_dir.absolute())
        assert log_dir["error"] is None
        sizes = {p["partition"]: p for p in log_dir["partitions"]}
        assert set(sizes) == {"dirs-0", "dirs-1"}  # --topic-list leaves dirs-other out
        assert sizes["dirs-0"]["size"] == len(tools_cluster.log_bytes(broker, "dirs", 0))
        assert sizes["dirs-1"]["size"] == 0
        assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in sizes.values())
    # the default: a table, a row per partition
    rows = [line.split() for line in tool(
        "log-dirs", "--bootstrap-server", tools_cluster.bootstrap, "--describe",
        "--topic-list", "dirs").stdout.splitlines()]
    assert rows[0] == ["BROKER", "LOG-DIR", "PARTITION", "SIZE", "OFFSET-LAG", "IS-FUTURE",
                       "ERROR"]
    assert {(r[0], r[2]) for r in rows[1:]} == {
        (str(e["broker"]), q["partition"]) for e in document["brokers"]
        for q in e["logDirs"][0]["partitions"]}, rows
    one = tool("log-dirs", "--bootstrap-server", tools_cluster.bootstrap, "--describe",
               "--broker-list", "2", "--json").stdout.splitlines()
    assert one[1] == "Received log directory information from brokers 2"
    [only] = json.loads(one[2])["brokers"]
    assert only["broker"] == 2
    assert {p["partition"] for p in only["logDirs"][0]["partitions"]} >= {
        "dirs-0", "dirs-1", "dirs-other-0"}
    bad = tool("log-dirs", "--bootstrap-server", tools_cluster.bootstrap, "--describe",
               "--broker-list", "9", check=False)
    assert bad.returncode == 1
    assert "The given brokers do not exist from --broker-list: 9" in bad.stderr


def test_topic_configs(tools_cluster: Cluster) -> None:
    tools_cluster.create_topic("conf", 1, configs={"retention.ms": "86400000"})
    base = ["configs", "--bootstrap-server", tools_cluster.bootstrap, "--entity-type", "topics",
            "--entity-name", "conf"]
    out = tool(*base, "--describe").stdout.splitlines()
    assert out == [
        "Dynamic configs for topic conf are:",
        "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "retention.ms=86400000, DEFAULT_CONFIG:log.retention.hours=168}"]
    done = tool(*base, "--alter", "--add-config",
                "cleanup.policy=[delete,compact],segment.bytes=1048576",
                "--delete-config", "retention.ms").stdout
    assert done == "Completed updating config for topic conf.\n"
    out = tool(*base, "--describe").stdout.splitlines()
    assert out[0] == "Dynamic configs for topic conf are:"
    assert out[1].startswith("  cleanup.policy=delete,compact sensitive=false synonyms={"
                             "DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete,compact, ")
    assert out[2].startswith("  segment.bytes=1048576 sensitive=false ")
    assert len(out) == 3
    # the change reached every broker's copy of the topic
    for broker_id in tools_cluster.brokers:
        shown = tool("configs", "--bootstrap-server", tools_cluster.brokers[broker_id].bootstrap,
                     "--entity-type", "topics", "--entity-name", "conf", "--describe").stdout
        assert "segment.bytes=1048576" in shown
    bad = tool(*base, "--alter", "--add-config", "no.such.config=1", check=False)
    assert bad.returncode == 1
    assert "Unknown topic config name: no.such.config" in bad.stderr


def test_dynamic_broker_configs_apply_without_restart(tools_cluster: Cluster) -> None:
    bootstrap = tools_cluster.bootstrap
    tools_cluster.create_topic("before-change", 1)
    base = ["configs", "--bootstrap-server", bootstrap, "--entity-type", "brokers"]
    assert tool(*base, "--entity-default", "--alter", "--add-config",
                "log.retention.ms=3600000").stdout == (
        "Completed updating default config for brokers in the cluster.\n")
    # Kafka's znode, written once, with its change notification
    data, _ = tools_cluster.zk.get("/config/brokers/<default>")
    assert json.loads(data) == {"version": 1, "config": {"log.retention.ms": "3600000"}}
    # every broker takes it at once: DescribeConfigs of each shows it as a dynamic default
    for broker_id in tools_cluster.brokers:
        def shown(b: int = broker_id) -> bool:
            out = tool(*base, "--entity-name", str(b), "--describe", "--all").stdout
            return ("  log.retention.ms=3600000 sensitive=false synonyms={"
                    "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, "
                    "DEFAULT_CONFIG:log.retention.hours=168}") in out.splitlines()
        wait_for(shown, what=f"broker {broker_id} to apply the default")
    assert tool(*base, "--entity-default", "--describe").stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=3600000 sensitive=false synonyms={"
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}"]
    # topics old and new take the new default (they do not override it)
    tools_cluster.create_topic("after-change", 1)
    for topic in ("before-change", "after-change"):
        out = tool("configs", "--bootstrap-server", bootstrap, "--entity-type", "topics",
                   "--entity-name", topic, "--describe", "--all").stdout.splitlines()
        assert ("  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
                "log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.hours=168}") in out

    # a per-broker value beats the default and reaches the open logs: broker 2 rolls
    # segments of 4 KiB, the others keep one segment
    tools_cluster.create_topic("rolling", 1)
    assert tool(*base, "--entity-name", "2", "--alter", "--add-config",
                "log.segment.bytes=4096").stdout == "Completed updating config for broker 2.\n"
    out = tool(*base, "--entity-name", "2", "--describe").stdout.splitlines()
    assert out == ["Dynamic configs for broker 2 are:",
                   "  log.segment.bytes=4096 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                   "log.segment.bytes=4096, DEFAULT_CONFIG:log.segment.bytes=1073741824}"]
    assert tool(*base, "--entity-name", "1", "--describe").stdout == (
        "Dynamic configs for broker 1 are:\n")
    # 20 batches of about 1 KiB, one request at a time: a follower appends what one fetch
    # brings into one segment (as Kafka's does), and requests pipelined behind a waiting
    # acks=all produce reach it in one fetch
    produce(tools_cluster, "rolling", {0: 200}, batch=10, in_flight=1)
    directory = {b: tools_cluster.brokers[b].data_dir / "rolling-0" for b in tools_cluster.brokers}
    wait_for(lambda: len(list(directory[2].glob("*.log"))) > 3,
             what="broker 2 to roll segments at its dynamic log.segment.bytes")
    assert len(list(directory[1].glob("*.log"))) == 1
    assert len(list(directory[3].glob("*.log"))) == 1

    # keys Kafka cannot change at run time are refused, with Kafka's message
    bad = tool(*base, "--entity-name", "1", "--alter", "--add-config", "listeners=x",
               check=False)
    assert bad.returncode == 1
    assert "Cannot update these configs dynamically: Set(listeners)" in bad.stderr
    # removing the values brings the static ones back
    tool(*base, "--entity-default", "--alter", "--delete-config", "log.retention.ms")
    tool(*base, "--entity-name", "2", "--alter", "--delete-config", "log.segment.bytes")
    assert tool(*base, "--entity-default", "--describe").stdout == (
        "Default configs for brokers in the cluster are:\n")
    wait_for(lambda: "  log.retention.ms=null sensitive=false synonyms={}" in tool(
        *base, "--entity-name", "3", "--describe", "--all").stdout.splitlines(),
        what="broker 3 to drop the default")


def test_get_offsets_and_delete_records(tools_cluster: Cluster, tmp_path: Path) -> None:
    tools_cluster.create_topic("offsets", 3)
    produce(tools_cluster, "offsets", {0: 5, 1: 3, 2: 0})
    base = ["get-offsets", "--bootstrap-server", tools_cluster.bootstrap]
    assert tool(*base, "--topic", "offsets").stdout == "offsets:0:5\noffsets:1:3\noffsets:2:0\n"
    assert tool(*base, "--topic", "offsets", "--time", "-2", "--partitions", "0,1").stdout == (
        "offsets:0:0\noffsets:1:0\n")
    assert tool(*base, "--topic", "offs.*", "--time", "latest", "--partitions", "1").stdout == (
        "offsets:1:3\n")
    # a timestamp: the first offset at or after it; later than every record: left out
    assert tool(*base, "--topic", "offsets", "--time", "0", "--partitions", "0").stdout == (
        "offsets:0:0\n")
    assert tool(*base, "--topic", "offsets", "--time", str(2**62)).stdout == ""

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"partitions": [
        {"topic": "offsets", "partition": 0, "offset": 3},
        {"topic": "offsets", "partition": 1, "offset": -1},
        {"topic": "offsets", "partition": 9, "offset": 1}], "version": 1}))
    out = tool("delete-records", "--bootstrap-server", tools_cluster.bootstrap,
               "--offset-json-file", str(spec)).stdout.splitlines()
    assert out == ["Executing records delete operation",
                   "Records delete operation completed:",
                   "partition: offsets-0\tlow_watermark: 3",
                   "partition: offsets-1\tlow_watermark: 3",
                   "partition: offsets-9\terror: This server does not host this "
                   "topic-partition."]
    assert tool(*base, "--topic", "offsets", "--time", "earliest").stdout == (
        "offsets:0:3\noffsets:1:3\noffsets:2:0\n")
