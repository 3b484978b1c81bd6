"""Metadata (3): brokers, topics, partitions and leaders; auto-creates topics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.coordination.base import TopicRecord, validate_topic_name
from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.broker import Broker
    from pybroker.server.dispatch import Request

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@handles(3, (0, 8))
async def handle_metadata(broker: Broker, request: Request) -> dict[str, Any]:
    body = request.body
    requested = body["topics"]
    # v0: an empty list means every topic; v1+: null does
    wants_all = requested is None or (request.version == 0 and not requested)
    if request.version >= 4:
        may_create = bool(body["allow_auto_topic_creation"])
    else:
        may_create = True
    if wants_all:
        topics = [topic_metadata(r) for r in broker.store.topics().values()]
    else:
        topics = [lookup(broker, t["name"], may_create) for t in requested]
    host, port = broker.advertised_host_port
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": broker.broker_id, "host": host, "port": port, "rack": None}],
        "cluster_id": broker.store.cluster_id,
        "controller_id": broker.broker_id,
        "topics": topics,
        "cluster_authorized_operations": -2147483648,
    }


def lookup(broker: Broker, name: str, may_create: bool) -> dict[str, Any]:
    record = broker.topic(name)
    if record is None:
        try:
            validate_topic_name(name)
            if may_create:
                record = broker.auto_create_topic(name)
        except KafkaError as exc:
            return topic_error(name, exc.code)
        if record is None:
            return topic_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return topic_metadata(record)


def topic_error(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "name": name, "is_internal": False, "partitions": [],
            "topic_authorized_operations": -2147483648}


def topic_metadata(record: TopicRecord) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": record.name,
        "is_internal": record.name in INTERNAL_TOPICS,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": index,
                "leader_id": state.leader,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": state.replicas,
                "isr_nodes": state.isr,
                "offline_replicas": [],
            }
            for index, state in enumerate(record.partitions)
        ],
        "topic_authorized_operations": -2147483648,
    }
