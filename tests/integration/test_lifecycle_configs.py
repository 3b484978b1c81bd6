"""Per-topic configs changed at run time: AlterConfigs (33) replaces the
override set, IncrementalAlterConfigs (44) SET/DELETE/APPEND/SUBTRACT; values
are validated, shown by DescribeConfigs with their source, applied to the open
logs and kept across restarts. Clients: confluent-kafka and kafka-python."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from .helpers import (
    OP_TIMEOUT_S,
    admin,
    assert_delivered,
    create_topic,
    produce_all,
    producer,
    watermarks,
)

if TYPE_CHECKING:
    from conftest import Broker, BrokerFactory

HOUR_MS = 3600_000


def describe(bootstrap: str, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    a = admin(bootstrap)  # keep the client alive while its future is pending
    fut = a.describe_configs([res], request_timeout=OP_TIMEOUT_S)
    return dict(fut[res].result(timeout=OP_TIMEOUT_S))


def incremental(bootstrap: str, resource: ConfigResource, *, validate_only: bool = False) -> None:
    a = admin(bootstrap)
    fut = a.incremental_alter_configs([resource], validate_only=validate_only,
                                      request_timeout=OP_TIMEOUT_S)
    fut[resource].result(timeout=OP_TIMEOUT_S)


def topic_ops(topic: str, *ops: tuple[str, AlterConfigOpType, str | None]) -> ConfigResource:
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, op, value in ops]
    return ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)


def error_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), exc
    return int(exc.args[0].code())


def test_incremental_set_delete_append_subtract(broker_factory: BrokerFactory,
                                                topic_name: str) -> None:
    b = broker_factory(log_retention_hours=100)
    create_topic(b.bootstrap, topic_name, config={"retention.ms": "123456"})
    incremental(b.bootstrap, topic_ops(
        topic_name,
        ("retention.ms", AlterConfigOpType.DELETE, None),
        ("retention.bytes", AlterConfigOpType.SET, "99999"),
        ("cleanup.policy", AlterConfigOpType.APPEND, "compact"),
    ))
    got = describe(b.bootstrap, topic_name)
    assert got["retention.ms"].value == str(100 * HOUR_MS)
    assert got["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert got["retention.bytes"].value == "99999"
    assert got["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert got["cleanup.policy"].value == "delete,compact"
    incremental(b.bootstrap, topic_ops(
        topic_name, ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete")))
    assert describe(b.bootstrap, topic_name)["cleanup.policy"].value == "compact"
    assert describe(b.bootstrap, topic_name)["segment.bytes"].source == \
        ConfigSource.DEFAULT_CONFIG.value
    b.restart()
    got = describe(b.bootstrap, topic_name)
    assert got["retention.bytes"].value == "99999"
    assert got["cleanup.policy"].value == "compact"
    assert got["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_invalid_values_are_rejected_and_nothing_changes(broker_factory: BrokerFactory,
                                                         topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, config={"retention.bytes": "5000"})
    for ops in [
        [("segment.bytes", AlterConfigOpType.SET, "lots")],
        [("no.such.config", AlterConfigOpType.SET, "1")],
        [("cleanup.policy", AlterConfigOpType.SET, "shred")],
        [("retention.ms", AlterConfigOpType.APPEND, "5")],  # not a list
        [("retention.bytes", AlterConfigOpType.SET, "1"),
         ("segment.bytes", AlterConfigOpType.SET, "-5")],  # all or nothing
    ]:
        with pytest.raises(KafkaException) as info:
            incremental(b.bootstrap, topic_ops(topic_name, *ops))
        assert error_code(info.value) == 40, ops  # INVALID_CONFIG
    assert describe(b.bootstrap, topic_name)["retention.bytes"].value == "5000"
    with pytest.raises(KafkaException) as info:
        incremental(b.bootstrap, topic_ops("no-such-topic-x", (
            "retention.ms", AlterConfigOpType.SET, "1")))
    assert error_code(info.value) == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_validate_only_changes_nothing(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    incremental(b.bootstrap, topic_ops(topic_name, (
        "retention.bytes", AlterConfigOpType.SET, "777")), validate_only=True)
    assert describe(b.bootstrap, topic_name)["retention.bytes"].value == "-1"


def test_alter_configs_replaces_the_whole_set(broker_factory: BrokerFactory,
                                              topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, config={"retention.ms": "60000",
                                                  "max.message.bytes": "5000"})
    res = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"retention.bytes": "4242"})
    a = admin(b.bootstrap)
    fut = a.alter_configs([res], request_timeout=OP_TIMEOUT_S)
    fut[res].result(timeout=OP_TIMEOUT_S)
    got = describe(b.bootstrap, topic_name)
    assert got["retention.bytes"].value == "4242"
    assert got["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert got["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


def test_static_broker_keys_are_refused(broker_factory: BrokerFactory) -> None:
    """Only Kafka's dynamic broker keys change at run time (issue 15); others are
    INVALID_CONFIG."""
    b = broker_factory()
    res = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.retention.check.interval.ms", "1000",
                    incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        incremental(b.bootstrap, res)
    assert error_code(info.value) == 40


def produce_sized(b: Broker, topic: str, count: int, size: int, timestamp: int | None = None
                  ) -> None:
    p = producer(b.bootstrap, linger_ms=0, batch_num_messages=1)
    records: list[dict[str, object]] = [{"value": b"x" * size} for _ in range(count)]
    if timestamp is not None:
        for r in records:
            r["timestamp"] = timestamp
    assert_delivered(produce_all(p, topic, records))  # type: ignore[arg-type]


def test_changes_apply_to_open_logs(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(log_retention_check_interval_ms=200)
    create_topic(b.bootstrap, topic_name)
    part = b.data_dir / f"{topic_name}-0"
    produce_sized(b, topic_name, 10, 200, timestamp=int(time.time() * 1000) - HOUR_MS)
    assert len(list(part.glob("*.log"))) == 1
    # segment.bytes goes to the Rust log: the next appends roll at ~1000 bytes
    incremental(b.bootstrap, topic_ops(topic_name, ("segment.bytes", AlterConfigOpType.SET,
                                                    "1000")))
    produce_sized(b, topic_name, 10, 200)
    assert len(list(part.glob("*.log"))) >= 4
    # max.message.bytes too
    incremental(b.bootstrap, topic_ops(topic_name, ("max.message.bytes", AlterConfigOpType.SET,
                                                    "100")))
    p = producer(b.bootstrap, linger_ms=0)
    reports = produce_all(p, topic_name, [{"value": b"y" * 300}])
    assert reports[0].error() is not None and reports[0].error().code() == 10
    # retention: the hour-old first segment goes on the next check
    assert watermarks(b.bootstrap, topic_name)[0] == 0
    incremental(b.bootstrap, topic_ops(topic_name, ("retention.ms", AlterConfigOpType.SET,
                                                    "600000")))
    deadline = time.monotonic() + 10
    while watermarks(b.bootstrap, topic_name)[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert watermarks(b.bootstrap, topic_name)[0] == 10


def test_kafka_python_alter_configs(broker_factory: BrokerFactory, topic_name: str) -> None:
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    client = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
    try:
        for incremental_api in (True, False):
            value = "11111" if incremental_api else "22222"
            client.alter_configs([KConfigResource(ConfigResourceType.TOPIC, topic_name,
                                                  configs={"retention.bytes": value})],
                                 incremental=incremental_api)
            assert describe(b.bootstrap, topic_name)["retention.bytes"].value == value
    finally:
        client.close()
