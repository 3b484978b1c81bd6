"""Dynamic broker configs in BrokerConfig: per-broker over cluster default over static
over the table's default, sources and synonyms as DescribeConfigs shows them, and only
Kafka's dynamic keys accepted."""

from __future__ import annotations

import pytest

from pybroker.config import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    TopicConfig,
    parse_dynamic,
)


def test_precedence_and_sources() -> None:
    config = BrokerConfig({"log.segment.bytes": "2000"})
    assert config.source("log.segment.bytes") is ConfigSource.STATIC_BROKER_CONFIG
    changed = config.set_dynamic({"log.segment.bytes": "3000"}, {})
    assert changed == {"log.segment.bytes"}
    assert config["log.segment.bytes"] == 3000
    assert config.source("log.segment.bytes") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    config.set_dynamic({"log.segment.bytes": "3000"}, {"log.segment.bytes": "4000"})
    assert config["log.segment.bytes"] == 4000
    assert config.source("log.segment.bytes") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert config.layers("log.segment.bytes") == [
        (4000, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (3000, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (2000, ConfigSource.STATIC_BROKER_CONFIG),
        (1073741824, ConfigSource.DEFAULT_CONFIG)]
    assert config.set_dynamic({}, {}) == {"log.segment.bytes"}
    assert config["log.segment.bytes"] == 2000


def test_topic_defaults_follow_dynamic_configs() -> None:
    config = BrokerConfig()
    topic = TopicConfig(config, {})
    assert topic["retention.ms"] == 168 * 3600_000
    config.set_dynamic({"log.retention.ms": "60000"}, {})
    assert topic["retention.ms"] == 60000
    assert topic.source("retention.ms") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert config.topic_default_synonyms("retention.ms") == [
        ("log.retention.ms", 60000, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", 168, ConfigSource.DEFAULT_CONFIG)]


def test_static_keys_are_not_dynamic() -> None:
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically"):
        parse_dynamic("listeners", "PLAINTEXT://:1")
    with pytest.raises(ConfigError):
        parse_dynamic("log.segment.bytes", "small")
    assert parse_dynamic("log.cleanup.policy", "delete,compact") == ["delete", "compact"]


def test_bad_stored_values_are_skipped() -> None:
    config = BrokerConfig()
    assert config.set_dynamic({"listeners": "x", "log.segment.bytes": "nope"}, {}) == set()
    assert config["log.segment.bytes"] == 1073741824


def test_synonym_groups_follow_kafka() -> None:
    """Kafka's configSynonyms: layer by layer, the group's keys in order, from the
    described key's own first value on."""
    config = BrokerConfig({"log.retention.ms": "5000"})
    config.set_dynamic({"log.retention.hours": "2"}, {})
    # the static ms wins over the dynamic hours, and the source says so
    assert config.topic_default("retention.ms") == 5000
    assert config.topic_default_source("retention.ms") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.synonyms("log.retention.ms") == [
        ("log.retention.ms", 5000, ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", 168, ConfigSource.DEFAULT_CONFIG)]
    assert config.synonyms("log.retention.hours") == [
        ("log.retention.hours", 2, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", 5000, ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", 168, ConfigSource.DEFAULT_CONFIG)]
    assert config.synonyms("log.retention.minutes") == []  # never set: no synonyms
