"""console-producer's headers and batching options (issue 27): parse.headers (Kafka's
LineMessageReader: `h1:v1,h2:v2<TAB>key<TAB>value`), --timeout (linger) and
--batch-size; the real tool, the records read back with a real consumer."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

if TYPE_CHECKING:
    from conftest import Broker

RUN_TIMEOUT_S = 90


def test_parse_headers_and_batching(broker: Broker, topic_name: str) -> None:
    lines = "h1:v1,h2:v2\tk1\tfirst\n\tk2\tsecond\n"
    result = subprocess.run(
        [sys.executable, "-m", "pybroker", "console-producer", "--bootstrap-server",
         broker.bootstrap, "--topic", topic_name, "--property", "parse.headers=true",
         "--property", "parse.key=true", "--timeout", "50", "--batch-size", "1024"],
        input=lines, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
    try:
        got = [m for m in consumer.consume(2, 30) if m.error() is None]
    finally:
        consumer.close()
    assert [(m.key(), m.value()) for m in got] == [(b"k1", b"first"), (b"k2", b"second")]
    assert got[0].headers() == [("h1", b"v1"), ("h2", b"v2")]
    assert not got[1].headers()


def test_a_line_without_the_headers_delimiter_says_which(broker: Broker,
                                                         topic_name: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pybroker", "console-producer", "--bootstrap-server",
         broker.bootstrap, "--topic", topic_name, "--property", "parse.headers=true"],
        input="no delimiter here\n", capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 1
    assert "No headers delimiter found on line number 1" in result.stderr, result.stderr
