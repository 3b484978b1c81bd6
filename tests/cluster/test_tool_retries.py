"""Retriable errors in the tools (issue 27): a tool asks again, within its timeout, when a
request fails with an error Kafka's clients retry (tools/_retry.py), here a real one:
the only replica of a partition is killed, so the partition has no leader
(LEADER_NOT_AVAILABLE, or a refused connection while a broker's metadata still names
the dead leader) until that broker is back. get-offsets and delete-records, run as an
operator runs them, wait for it (saying so at INFO) and then answer; before, they
reported the partition failed at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.cluster.cluster import Cluster, wait_for

#: the tools' own timeout here: a broker restart on a loaded machine fits in it
TOOL_TIMEOUT_MS = 120000
RUN_TIMEOUT_S = TOOL_TIMEOUT_MS / 1000 + 60
RECORDS = 5


class Tool:
    """A `pybroker ... --log-level INFO` in the background, its stderr read as it comes."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pybroker", *args, "--log-level", "INFO"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.err_lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err_lines.append(line)

    def retrying(self) -> bool:
        """Whether it said it asks again (or has ended, which the caller then checks)."""
        return self.proc.poll() is not None or any(
            "asking again" in line for line in self.err_lines)

    def finish(self) -> tuple[int, str, str]:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        code = self.proc.wait(RUN_TIMEOUT_S)
        self._reader.join(10)
        return code, out, "".join(self.err_lines)


def test_tools_wait_for_a_partition_leader_to_come_back(cluster: Cluster,
                                                        tmp_path: Path) -> None:
    topic = "lonely"
    cluster.admin().create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[2]])]
                                  )[topic].result(60)
    wait_for(lambda: cluster.leader(topic, 0) == 2, what=f"broker 2 to lead {topic}-0")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(60) == 0

    cluster.kill(2)
    wait_for(lambda: cluster.leader(topic, 0) == -1, what=f"{topic}-0 to lose its leader")
    config = tmp_path / "tool.properties"
    config.write_text(f"default.api.timeout.ms={TOOL_TIMEOUT_MS}\n")
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": 2}]}))
    bootstrap = cluster.brokers[1].bootstrap
    get_offsets = Tool("get-offsets", "--bootstrap-server", bootstrap, "--topic", topic,
                       "--command-config", str(config))
    delete_records = Tool("delete-records", "--bootstrap-server", bootstrap,
                          "--offset-json-file", str(plan), "--command-config", str(config))
    try:
        for tool in (get_offsets, delete_records):
            wait_for(tool.retrying, RUN_TIMEOUT_S, "the tool to ask again")
            assert tool.proc.poll() is None, tool.finish()  # still waiting, not failed
        cluster.restart(2)
    finally:
        results = [tool.finish() for tool in (get_offsets, delete_records)]
    (code, out, err), (del_code, del_out, del_err) = results
    assert code == 0 and out.splitlines() == [f"{topic}:0:{RECORDS}"], (code, out, err)
    assert "Skip getting offsets" not in err, err
    assert del_code == 0, (del_out, del_err)
    assert f"partition: {topic}-0\tlow_watermark: 2" in del_out.splitlines(), del_out
