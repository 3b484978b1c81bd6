"""console-consumer as an operator uses it (issue 27): --include REGEX over several topics,
--formatter with Kafka's DefaultMessageFormatter (and its --formatter-config), another
formatter refused in one line; the real tool against a real broker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Producer

if TYPE_CHECKING:
    from conftest import Broker

RUN_TIMEOUT_S = 90


def consume(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", "console-consumer",
                           "--bootstrap-server", broker.bootstrap, *args], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)


def test_include_reads_every_matching_topic(broker: Broker, topic_name: str,
                                           tmp_path: Path) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for suffix in ("a", "b", "not"):
        producer.produce(f"{topic_name}-{suffix}", key=suffix.encode(), value=b"v")
    assert producer.flush(30) == 0
    formatter = tmp_path / "formatter.properties"
    formatter.write_text("print.key=true\nkey.separator=|\n")
    result = consume(broker, "--include", f"{topic_name}-(a|b)", "--from-beginning",
                     "--max-messages", "2", "--timeout-ms", "30000",
                     "--formatter", "kafka.tools.DefaultMessageFormatter",
                     "--formatter-config", str(formatter))
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["a|v", "b|v"], result.stdout
    assert "Processed a total of 2 messages" in result.stderr


def test_an_unknown_formatter_is_refused(broker: Broker) -> None:
    result = consume(broker, "--topic", "t", "--formatter", "com.example.Fancy")
    assert result.returncode == 1
    assert "formatter com.example.Fancy is not available" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
