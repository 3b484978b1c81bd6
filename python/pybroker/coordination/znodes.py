"""Kafka's ZooKeeper znode layout and payloads, as msgspec Structs.

Paths and JSON follow Kafka's ZooKeeper mode (kafka.zk.ZkData, Kafka 3.x) field for
field, so an operator's `zkCli.sh get /brokers/ids/0` shows what a Kafka broker
would have written, and the Structs decode what Kafka wrote:

  /cluster/id                           {"version":"1","id":"<22-char base64 uuid>"}
  /controller_epoch                     5                          (a bare integer)
  /controller               ephemeral   {"version":2,"brokerid":0,"timestamp":"<ms>",
                                         "kraftControllerEpoch":-1}
  /brokers/ids/<id>         ephemeral   BrokerRegistration, version 5
  /brokers/topics/<t>                   {"version":3,"topic_id":"<base64 uuid>",
                                         "partitions":{"0":[1,2]},
                                         "adding_replicas":{},"removing_replicas":{}}
  /brokers/topics/<t>/partitions/<p>/state
                                        {"controller_epoch":1,"leader":1,"version":1,
                                         "leader_epoch":0,"isr":[1,2]}
                                         (+ "leader_recovery_state":1 while RECOVERING)
  /config/topics/<t>                    {"version":1,"config":{"retention.ms":"1000"}}
  /config/changes/config_change_<seq>   {"version":2,"entity_path":"topics/<t>"}
  /admin/delete_topics/<t>              (no data: the znode's existence is the request)
  /admin/reassign_partitions            {"version":1,"partitions":[{"topic":"t","partition":0,
                                         "replicas":[1,2]}]}   (a move request, consumed)
  /isr_change_notification/isr_change_<seq>
                                        {"version":1,"partitions":[{"topic":"t","partition":0}]}
  /latest_producer_id_block             {"version":1,"broker":0,"block_start":"0",
                                         "block_end":"999"}   (end inclusive, as strings)

Decoding goes through `decode()`, which turns any msgspec error into MalformedZNode
naming the path: a hand-edited or foreign znode is a clear error, never a KeyError."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

import msgspec
from msgspec import UNSET, Struct, UnsetType

from pybroker.coordination.errors import MalformedZNode

T = TypeVar("T")

# --- paths (Kafka's ZkData objects) ------------------------------------------------------

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
ISR_CHANGES = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
#: pybroker's own: a broker's replicas on failed log dirs (see OfflineReplicas)
OFFLINE_REPLICAS = "/brokers/offline_replicas"

#: persistent paths Kafka creates when a broker starts (ZkData.PersistentZkPaths)
PERSISTENT_PATHS = (
    "/consumers", BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, "/brokers/seqid",
    ISR_CHANGES, PRODUCER_ID_BLOCK, "/log_dir_event_notification", CONFIG_TOPICS,
    "/config/clients", "/config/users", "/config/brokers", "/config/ips",
    OFFLINE_REPLICAS,
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def offline_replicas_path(broker_id: int) -> str:
    return f"{OFFLINE_REPLICAS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# --- ids ---------------------------------------------------------------------------------

def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString; ValueError when `text` is not 22 chars of base64."""
    if len(text) != 22:
        raise ValueError(f"{text!r} is not a Kafka uuid (22 base64 characters)")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def new_cluster_id() -> str:
    """Kafka's cluster id: a random Uuid in its base64 form."""
    return kafka_uuid(uuid.uuid4())


def now_ms_text() -> str:
    """Kafka writes timestamps in znodes as strings of epoch milliseconds."""
    return str(time.time_ns() // 1_000_000)


# --- payloads ----------------------------------------------------------------------------

class Endpoint(NamedTuple):
    listener_name: str
    security_protocol: str
    host: str
    port: int


#: Kafka's listener.security.protocol.map default: the protocol names map to themselves
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class BrokerRegistration(Struct, kw_only=True):
    """/brokers/ids/<id>, version 5. `host`/`port` repeat the first PLAINTEXT endpoint
    for old clients (null / -1 without one); `rack` is absent when unset."""

    listener_security_protocol_map: dict[str, str] = {}
    endpoints: list[str]
    rack: str | None | UnsetType = UNSET
    jmx_port: int = -1
    host: str | None = None
    timestamp: str = ""
    port: int = -1
    version: int = 5
    #: KIP-584 supported features: {"name": {"min_version": 1, "max_version": 3}}
    features: dict[str, dict[str, int]] = {}

    @classmethod
    def create(
        cls,
        listeners: Iterable[tuple[str, str, int]],
        *,
        security_protocols: Mapping[str, str] | None = None,
        rack: str | None = None,
        jmx_port: int = -1,
    ) -> BrokerRegistration:
        """The registration a broker writes for its advertised (name, host, port)
        listeners. `security_protocols` is listener.security.protocol.map; without it
        a listener's name must be a protocol name (Kafka's default map)."""
        endpoints: list[str] = []
        protocol_map: dict[str, str] = {}
        host: str | None = None
        port = -1
        for name, lhost, lport in listeners:
            protocol = (security_protocols or {}).get(name, name)
            if protocol not in SECURITY_PROTOCOLS:
                raise ValueError(f"listener {name} has no security protocol "
                                 f"(one of {', '.join(SECURITY_PROTOCOLS)})")
            shown = f"[{lhost}]" if ":" in lhost else lhost
            endpoints.append(f"{name}://{shown}:{lport}")
            protocol_map[name] = protocol
            if protocol == "PLAINTEXT" and host is None:
                host, port = lhost, lport
        return cls(listener_security_protocol_map=protocol_map, endpoints=endpoints,
                   rack=UNSET if rack is None else rack, jmx_port=jmx_port, host=host,
                   port=port, timestamp=now_ms_text())

    def parsed_endpoints(self) -> list[Endpoint]:
        """Endpoints as (listener, protocol, host, port); ValueError on a bad string."""
        out = []
        for text in self.endpoints:
            name, sep, address = text.partition("://")
            lhost, colon, lport = address.rpartition(":")
            if not sep or not colon or not lport.lstrip("-").isdigit():
                raise ValueError(f"endpoint {text!r} is not NAME://host:port")
            protocol = self.listener_security_protocol_map.get(name, name)
            out.append(Endpoint(name, protocol, lhost.strip("[]"), int(lport)))
        return out


class ControllerZNode(Struct, kw_only=True):
    """/controller: who is controller. Version 2 adds kraftControllerEpoch (-1 in ZK mode)."""

    version: int = 2
    brokerid: int
    timestamp: str = ""
    kraftControllerEpoch: int = -1  # noqa: N815 - Kafka's JSON name


class TopicZNode(Struct, kw_only=True):
    """/brokers/topics/<t>: partition -> replica list, version 3 with the topic id."""

    partitions: dict[int, list[int]]
    topic_id: str | UnsetType = UNSET
    adding_replicas: dict[int, list[int]] = {}
    removing_replicas: dict[int, list[int]] = {}
    version: int = 3


#: LeaderRecoveryState: RECOVERED (0, not written) or RECOVERING (1, after unclean election)
RECOVERED = 0
RECOVERING = 1


class LeaderAndIsr(Struct, kw_only=True, frozen=True, gc=False):
    """/brokers/topics/<t>/partitions/<p>/state: leader, leader epoch, ISR and the epoch
    of the controller that wrote it. leader_recovery_state is written only when it is
    not RECOVERED (0), as Kafka does; reading it absent means RECOVERED.

    Not tracked by the cyclic GC (gc=False): it holds ints and a list of ints, so it can
    be in no reference cycle, and every broker keeps one per partition (its metadata
    listener's states), renewed at every state change: one object fewer per partition
    for every full collection to walk until it is frozen (issue 25)."""

    controller_epoch: int
    leader: int
    version: int = 1
    leader_epoch: int
    isr: list[int]
    leader_recovery_state: int | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.leader_recovery_state == RECOVERED:
            msgspec.structs.force_setattr(self, "leader_recovery_state", UNSET)

    @property
    def recovery_state(self) -> int:
        return RECOVERED if self.leader_recovery_state is UNSET else int(
            self.leader_recovery_state)


class TopicConfigZNode(Struct, kw_only=True):
    """/config/topics/<t>: the topic's config overrides (strings)."""

    version: int = 1
    config: dict[str, str] = {}


class ConfigChangeNotification(Struct, kw_only=True):
    """/config/changes/config_change_<seq>: which entity's config changed."""

    version: int = 2
    entity_path: str


class TopicPartitionRef(Struct):
    topic: str
    partition: int


class IsrChangeNotification(Struct, kw_only=True):
    """/isr_change_notification/isr_change_<seq>: partitions whose ISR a leader changed."""

    version: int = 1
    partitions: list[TopicPartitionRef]


class OfflineReplicas(Struct, kw_only=True):
    """/brokers/offline_replicas/<id>, ephemeral, pybroker's own: the partitions of broker
    <id> whose log dir failed, for its registration `broker_epoch`. Kafka's ZooKeeper-era
    controller learns these from the brokers' LeaderAndIsr answers (KAFKA_STORAGE_ERROR)
    after a /log_dir_event_notification; pybroker's brokers send no LeaderAndIsr, so the
    broker writes the partitions themselves where the controller watches."""

    version: int = 1
    broker_epoch: int
    partitions: list[TopicPartitionRef]


class PartitionReassignment(Struct, kw_only=True):
    topic: str
    partition: int
    replicas: list[int]


class ReassignPartitionsZNode(Struct, kw_only=True):
    """/admin/reassign_partitions: moves requested the ZooKeeper way (Kafka's
    kafka-reassign-partitions.sh --zookeeper); the controller starts and removes them."""

    version: int = 1
    partitions: list[PartitionReassignment] = []


class ClusterIdZNode(Struct, kw_only=True):
    """/cluster/id. Kafka writes this version as a string, unlike all the others."""

    version: str = "1"
    id: str


class ProducerIdBlockZNode(Struct, kw_only=True):
    """/latest_producer_id_block: the last block handed out; ids as decimal strings,
    block_end inclusive."""

    version: int = 1
    broker: int
    block_start: str
    block_end: str

    def bounds(self, path: str) -> tuple[int, int]:
        try:
            return int(self.block_start), int(self.block_end)
        except ValueError:
            raise MalformedZNode(path, None, f"block_start {self.block_start!r} / block_end "
                                 f"{self.block_end!r} are not integers") from None


# --- codec -------------------------------------------------------------------------------

_encoder = msgspec.json.Encoder()


def encode(value: object) -> bytes:
    return _encoder.encode(value)


#: one decoder per znode type: msgspec.json.decode(type=...) looks the type up on every
#: call, a third of the cost of decoding a small state (a new controller decodes every
#: partition's state, issue 25)
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def decode(path: str, data: bytes | None, kind: type[T]) -> T:
    """Decode a znode's data as `kind`; MalformedZNode (naming `path`) if it isn't."""
    if not data:
        raise MalformedZNode(path, data, f"empty, expected {kind.__name__}")
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    try:
        return decoder.decode(data)  # type: ignore[no-any-return]
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise MalformedZNode(path, data, str(exc)) from exc


def decode_controller_epoch(path: str, data: bytes | None) -> int:
    epoch = decode(path, data, int)
    if epoch < 0:
        raise MalformedZNode(path, data, "controller epoch is negative")
    return epoch
