"""Znode payloads: Kafka's JSON in, Kafka's JSON out, clear errors for anything else."""

from __future__ import annotations

import gc
import json
import uuid

import msgspec
import pytest

from pybroker.coordination import znodes as zn
from pybroker.coordination.errors import MalformedZNode

# as Kafka 3.x brokers and controllers write them (key order is a HashMap's)
KAFKA_BROKER_V5 = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
                   b'"SSL":"SSL"},"endpoints":["PLAINTEXT://kafka-1:9092","SSL://kafka-1:9093"],'
                   b'"jmx_port":-1,"port":9092,"host":"kafka-1","version":5,'
                   b'"timestamp":"1700000000000"}')
KAFKA_BROKER_V2 = (b'{"jmx_port":9999,"timestamp":"1","endpoints":["PLAINTEXT://h:9092"],'
                   b'"host":"h","version":2,"port":9092}')


def test_kafka_broker_registrations_decode() -> None:
    v5 = zn.decode("/brokers/ids/1", KAFKA_BROKER_V5, zn.BrokerRegistration)
    assert v5.parsed_endpoints() == [zn.Endpoint("PLAINTEXT", "PLAINTEXT", "kafka-1", 9092),
                                     zn.Endpoint("SSL", "SSL", "kafka-1", 9093)]
    assert (v5.host, v5.port, v5.version, v5.rack) == ("kafka-1", 9092, 5, zn.UNSET)
    v2 = zn.decode("/brokers/ids/2", KAFKA_BROKER_V2, zn.BrokerRegistration)
    assert (v2.jmx_port, v2.features) == (9999, {})


def test_broker_registration_is_kafkas_v5() -> None:
    reg = zn.BrokerRegistration.create([("REPLICATION", "::1", 9093), ("PLAINTEXT", "h", 9092)],
                                       security_protocols={"REPLICATION": "SSL"})
    raw = json.loads(zn.encode(reg))
    assert raw["version"] == 5 and "rack" not in raw  # Kafka writes rack only when set
    assert raw["endpoints"] == ["REPLICATION://[::1]:9093", "PLAINTEXT://h:9092"]
    assert (raw["host"], raw["port"]) == ("h", 9092)  # the first PLAINTEXT endpoint
    assert reg.parsed_endpoints()[0] == zn.Endpoint("REPLICATION", "SSL", "::1", 9093)
    no_plaintext = json.loads(zn.encode(zn.BrokerRegistration.create([("SSL", "h", 1)])))
    assert (no_plaintext["host"], no_plaintext["port"]) == (None, -1)
    with pytest.raises(ValueError, match="CUSTOM"):
        zn.BrokerRegistration.create([("CUSTOM", "h", 1)])


def test_controller_versions() -> None:
    old = zn.decode("/controller", b'{"version":1,"brokerid":3,"timestamp":"1"}',
                    zn.ControllerZNode)
    assert (old.brokerid, old.kraftControllerEpoch) == (3, -1)
    assert json.loads(zn.encode(zn.ControllerZNode(brokerid=1, timestamp="5"))) == {
        "version": 2, "brokerid": 1, "timestamp": "5", "kraftControllerEpoch": -1}
    assert zn.decode_controller_epoch("/controller_epoch", b"12") == 12


def test_leader_recovery_state_is_written_only_when_recovering() -> None:
    recovered = zn.LeaderAndIsr(controller_epoch=1, leader=2, leader_epoch=3, isr=[2],
                                leader_recovery_state=zn.RECOVERED)
    assert "leader_recovery_state" not in json.loads(zn.encode(recovered))
    assert recovered.recovery_state == zn.RECOVERED
    recovering = zn.LeaderAndIsr(controller_epoch=1, leader=2, leader_epoch=3, isr=[2],
                                 leader_recovery_state=zn.RECOVERING)
    assert json.loads(zn.encode(recovering))["leader_recovery_state"] == 1
    assert zn.decode("/s", zn.encode(recovering), zn.LeaderAndIsr) == recovering


def test_kafka_uuids() -> None:
    value = uuid.uuid4()
    text = zn.kafka_uuid(value)
    assert len(text) == 22 and "=" not in text
    assert zn.parse_kafka_uuid(text) == value
    assert zn.kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's ZERO_UUID
    with pytest.raises(ValueError):
        zn.parse_kafka_uuid(str(value))


def test_producer_id_block_bounds() -> None:
    block = zn.decode("/latest_producer_id_block",
                      b'{"version":1,"broker":0,"block_start":"1000","block_end":"1999"}',
                      zn.ProducerIdBlockZNode)
    assert block.bounds("/latest_producer_id_block") == (1000, 1999)


@pytest.mark.parametrize("data, kind, needle", [
    (b"", zn.TopicZNode, "empty"),
    (None, zn.TopicZNode, "empty"),
    (b"{", zn.TopicZNode, "truncated"),
    (b'{"version":3}', zn.TopicZNode, "partitions"),
    (b'{"partitions":{"0":["a"]}}', zn.TopicZNode, "partitions"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1]}', zn.LeaderAndIsr,
     "controller_epoch"),
    (b'{"version":1,"config":{"a":1}}', zn.TopicConfigZNode, "config"),
    (b'[1,2]', zn.ClusterIdZNode, "object"),
    (b'"x"', int, "int"),
])
def test_malformed_payloads_name_the_path(data: bytes | None, kind: type, needle: str) -> None:
    with pytest.raises(MalformedZNode) as exc:
        zn.decode("/some/path", data, kind)
    assert exc.value.path == "/some/path"
    assert "/some/path" in str(exc.value) and needle in str(exc.value)


def test_negative_controller_epoch_is_malformed() -> None:
    with pytest.raises(MalformedZNode, match="negative"):
        zn.decode_controller_epoch("/controller_epoch", b"-1")


def test_a_partition_state_is_not_walked_by_the_cyclic_gc() -> None:
    """A broker keeps a state per partition (thousands), renewed at every change: the
    decoded state is not tracked, only its ISR list is (issue 25)."""
    path = zn.partition_state_path("t", 0)
    state = zn.decode(path, b'{"controller_epoch":1,"leader":1,"version":1,'
                            b'"leader_epoch":2,"isr":[1,2,3]}', zn.LeaderAndIsr)
    assert not gc.is_tracked(state) and gc.is_tracked(state.isr)
    assert not gc.is_tracked(msgspec.structs.replace(state, isr=[1, 2]))
    assert not gc.is_tracked(zn.LeaderAndIsr(controller_epoch=1, leader=1, leader_epoch=1,
                                             isr=[1]))
    assert state.isr == [1, 2, 3] and state.leader_epoch == 2
