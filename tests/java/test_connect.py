"""Kafka Connect in distributed mode (connect-distributed.sh of a stock distribution)
on pybroker: the worker creates its compacted internal topics (configs, offsets,
status), a FileStreamSource connector copies a file into a topic and a FileStreamSink
connector copies the topic into another file; after a clean worker restart the
connectors come back from the config topic and the source resumes from its offset
(no line lost or repeated). Skipped without KAFKA_HOME."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.conftest import Broker, BrokerFactory, free_port
from tests.java.kafka import App, app, kafka_home, requires_kafka, wait_until, write_properties

pytestmark = [requires_kafka, pytest.mark.timeout(600)]

TOPIC = "connect-lines"
INTERNAL = {"config": "connect-configs", "offset": "connect-offsets", "status": "connect-status"}


def rest(port: int, path: str, body: dict[str, Any] | None = None,
         method: str | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read().decode()
    return json.loads(text) if text else None


def rest_up(port: int) -> bool:
    try:
        return "version" in rest(port, "/")
    except (OSError, urllib.error.URLError, ValueError):
        return False


def file_plugin() -> str:
    """Stock Kafka keeps the file connectors off the worker's classpath (since 3.2):
    they load from plugin.path, as its quickstart says."""
    [jar] = sorted((kafka_home() / "libs").glob("connect-file-*.jar"))
    return str(jar)


def worker(broker: Broker, tmp_path: Path, port: int) -> App:
    props = write_properties(tmp_path / "worker.properties", {
        "bootstrap.servers": broker.bootstrap, "group.id": "connect-cluster",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        **{f"{kind}.storage.topic": name for kind, name in INTERNAL.items()},
        **{f"{kind}.storage.replication.factor": "1" for kind in INTERNAL},
        "offset.flush.interval.ms": "500", "listeners": f"http://127.0.0.1:{port}",
        "plugin.path": file_plugin()})
    return app("connect-distributed.sh", str(props), log_path=tmp_path / "connect.log")


def sink_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def test_file_source_to_topic_to_file_sink(broker_factory: BrokerFactory,
                                           tmp_path: Path) -> None:
    broker = broker_factory()
    port = free_port()
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    lines = [f"line {i} of the source file" for i in range(200)]
    source.write_text("\n".join(lines) + "\n")
    connect = worker(broker, tmp_path, port)
    running: list[App] = [connect.start()]
    try:
        wait_until(lambda: rest_up(port), 180, "the Connect REST API",
                   on_timeout=connect.log_tail)
        plugins = {p["class"] for p in rest(port, "/connector-plugins")}
        assert {"org.apache.kafka.connect.file.FileStreamSourceConnector",
                "org.apache.kafka.connect.file.FileStreamSinkConnector"} <= plugins
        rest(port, "/connectors", {"name": "file-source", "config": {
            "connector.class": "FileStreamSource", "tasks.max": "1",
            "file": str(source), "topic": TOPIC}})
        rest(port, "/connectors", {"name": "file-sink", "config": {
            "connector.class": "FileStreamSink", "tasks.max": "1",
            "file": str(sink), "topics": TOPIC}})
        wait_until(lambda: sink_lines(sink) == lines, 120, "the sink file to match",
                   on_timeout=lambda: f"{len(sink_lines(sink))} lines\n" + connect.log_tail())
        for name in ("file-source", "file-sink"):
            status = rest(port, f"/connectors/{name}/status")
            assert status["connector"]["state"] == "RUNNING", status
            assert [t["state"] for t in status["tasks"]] == ["RUNNING"], status

        # the worker's internal topics: compacted, the config topic with one partition
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resources = [ConfigResource(ConfigResource.Type.TOPIC, name)
                     for name in INTERNAL.values()]
        for resource, future in admin.describe_configs(resources).items():
            configs = future.result(30)
            assert configs["cleanup.policy"].value == "compact", resource
        meta = admin.list_topics(timeout=30)
        assert len(meta.topics[INTERNAL["config"]].partitions) == 1

        # clean restart: connectors from the config topic, the source from its offset
        assert connect.stop(60) in (0, 143)
        more = [f"appended line {i}" for i in range(100)]
        with source.open("a") as f:
            f.write("\n".join(more) + "\n")
        connect.start()
        wait_until(lambda: rest_up(port), 180, "the Connect REST API after the restart",
                   on_timeout=connect.log_tail)
        assert sorted(rest(port, "/connectors")) == ["file-sink", "file-source"]
        wait_until(lambda: sink_lines(sink) == lines + more, 120,
                   "the appended lines in the sink, once each",
                   on_timeout=lambda: f"{len(sink_lines(sink))} lines\n" + connect.log_tail())
    finally:
        for proc in running:
            proc.stop(60)
