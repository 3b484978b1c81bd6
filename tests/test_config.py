from pathlib import Path

import pytest

from pybroker.config import BrokerConfig, ConfigError, ConfigSource, TopicConfig, parse_topic_config


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config["num.partitions"] == 1
    assert config["message.max.bytes"] == 1048588
    assert config["socket.request.max.bytes"] == 104857600
    assert config["auto.create.topics.enable"] is True
    assert config.topic_default("retention.ms") == 7 * 24 * 3600 * 1000
    assert config.topic_default("segment.ms") == 7 * 24 * 3600 * 1000
    assert config.topic_default("cleanup.policy") == ["delete"]
    assert config.source("num.partitions") is ConfigSource.DEFAULT_CONFIG


def test_properties_file_and_overrides(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# comment\nnum.partitions=3\nlog.retention.hours = 1\n"
        "listeners=PLAINTEXT://127.0.0.1:19092\nsome.unknown.key=x\n")
    config = BrokerConfig.load(props, ["num.partitions=5", "auto.create.topics.enable=false"])
    assert config["num.partitions"] == 5
    assert config["auto.create.topics.enable"] is False
    assert config.topic_default("retention.ms") == 3600_000
    assert config.topic_default_source("retention.ms") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.unknown == {"some.unknown.key": "x"}


def test_retention_fallback_chain() -> None:
    assert BrokerConfig({"log.retention.minutes": "2"}).topic_default("retention.ms") == 120_000
    config = BrokerConfig({"log.retention.minutes": "2", "log.retention.ms": "5"})
    assert config.topic_default("retention.ms") == 5


def test_bad_values_are_rejected() -> None:
    with pytest.raises(ConfigError):
        BrokerConfig({"num.partitions": "many"})
    with pytest.raises(ConfigError):
        BrokerConfig({"num.partitions": "0"})
    with pytest.raises(ConfigError):
        BrokerConfig.load(None, ["novalue"])
    with pytest.raises(ConfigError):
        parse_topic_config("cleanup.policy", "shred")
    with pytest.raises(ConfigError):
        parse_topic_config("no.such.config", "1")


def test_topic_overrides_win() -> None:
    broker = BrokerConfig({"log.segment.bytes": "1000"})
    topic = TopicConfig(broker, {"retention.ms": parse_topic_config("retention.ms", "42")})
    assert topic["retention.ms"] == 42
    assert topic.source("retention.ms") is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert topic["segment.bytes"] == 1000
    assert topic.source("segment.bytes") is ConfigSource.STATIC_BROKER_CONFIG
    assert parse_topic_config("cleanup.policy", "compact,delete") == ["compact", "delete"]


def test_unknown_keys_are_logged_with_a_hint(caplog: pytest.LogCaptureFixture) -> None:
    config = BrokerConfig({"listener": "PLAINTEXT://h:1", "quux": "8"})
    with caplog.at_level("WARNING", logger="pybroker.config"):
        config.log_unknown()
    assert [r.getMessage() for r in caplog.records] == [
        "The configuration 'listener' was supplied but isn't a known config. "
        "Did you mean 'listeners'?",
        "The configuration 'quux' was supplied but isn't a known config."]
    assert config["listeners"] == "PLAINTEXT://127.0.0.1:9092"


def test_listener_security_protocol_map_default_is_kafkas() -> None:
    assert BrokerConfig()["listener.security.protocol.map"] == (
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT")
