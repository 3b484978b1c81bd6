"""Metadata (3): brokers, topics, partitions and leaders; auto-creates topics.

v10+ carry topic ids (KIP-516) and may ask for topics by id (KIP-848 consumers
learn their assignment as topic ids and resolve them here)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pybroker.admin.internal_topics import INTERNAL_TOPICS
from pybroker.coordination.base import TopicRecord, validate_topic_name
from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.controller_only import advertised_controller
from pybroker.handlers.registry import handles
from pybroker.protocol.codec import PreEncoded
from pybroker.protocol.frame import response_element_encoder
from pybroker.protocol.types import ZERO_UUID
from pybroker.security.acls import CLUSTER_NAME, ResourceType
from pybroker.security.authorizer import authorizer_for
from pybroker.security.checks import CREATE_DENIED
from pybroker.security.operations import NOT_REQUESTED, authorized_operations
from pybroker.security.session import listener_of

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.metadata.cache import MetadataCache
    from pybroker.server.dispatch import Request



@handles(3, (0, 13))
async def handle_metadata(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    requested = body["topics"]
    # v0: an empty list means every topic; v1+: null does
    wants_all = requested is None or (request.version == 0 and not requested)
    # (before v4 the field is absent and decodes as true: old clients always may; the
    # authorizer turns it off for a principal that may not create the topics)
    may_create = bool(body["allow_auto_topic_creation"])
    metadata = ctx.metadata
    per_principal = request.version >= 8 and body["include_topic_authorized_operations"]
    if wants_all and not per_principal:
        topics = [encoded_topic_metadata(metadata, r, request.version)
                  for r in list(metadata.topics.values())]
    elif wants_all:
        topics = [topic_metadata(metadata, r) for r in list(metadata.topics.values())]
    else:
        topics = [await lookup(ctx, t["name"], may_create, t.get(CREATE_DENIED, False))
                  if t["name"] is not None else lookup_id(ctx, t["topic_id"])
                  for t in requested]
    authorizer = authorizer_for(ctx.config, ctx.admin.backend)
    if request.version >= 8 and body["include_topic_authorized_operations"]:
        for topic in topics:
            if topic["name"] is not None:
                topic["topic_authorized_operations"] = authorized_operations(
                    authorizer, request.connection, ResourceType.TOPIC, topic["name"])
    cluster_ops = NOT_REQUESTED
    if 8 <= request.version <= 10 and body["include_cluster_authorized_operations"]:
        cluster_ops = authorized_operations(authorizer, request.connection,
                                            ResourceType.CLUSTER, CLUSTER_NAME)
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                    for b in metadata.brokers.values()
                    for host, port in (b.address(listener_of(request.connection)),)],
        "cluster_id": metadata.cluster_id,
        "controller_id": advertised_controller(ctx),
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
    }


async def lookup(ctx: BrokerContext, name: str, may_create: bool,
                 create_denied: bool = False) -> dict[str, Any]:
    """The topic's metadata; an unknown topic is auto-created when the request and
    auto.create.topics.enable allow, unless the principal may not create it
    (`create_denied`): then TOPIC_AUTHORIZATION_FAILED, as Kafka answers."""
    record = ctx.metadata.topic(name)
    if record is None:
        if may_create and create_denied and ctx.config["auto.create.topics.enable"]:
            return topic_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        try:
            validate_topic_name(name)
            if may_create:
                record = await ctx.admin.auto_create_topic(name)
        except KafkaError as exc:
            return topic_error(name, exc.code)
        if record is None:
            return topic_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return topic_metadata(ctx.metadata, record)


def lookup_id(ctx: BrokerContext, topic_id: uuid.UUID) -> dict[str, Any]:
    """v12+: a topic asked for by id alone (KIP-516)."""
    record = ctx.metadata.topic_by_id(topic_id)
    if record is None:
        return topic_error(None, ErrorCode.UNKNOWN_TOPIC_ID) | {"topic_id": topic_id}
    return topic_metadata(ctx.metadata, record)


def topic_error(name: str | None, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "name": name, "topic_id": ZERO_UUID, "is_internal": False,
            "partitions": [], "topic_authorized_operations": NOT_REQUESTED}


def encoded_topic_metadata(metadata: MetadataCache, record: TopicRecord, version: int
                           ) -> PreEncoded:
    """topic_metadata, encoded for `version`, from the cache while neither the topic's
    record nor the live brokers changed (both are replaced, never changed in place):
    a full Metadata request at thousands of partitions encodes only what moved."""
    key = (record.name, version)
    cached = metadata.encoded_topics.get(key)
    if cached is not None and cached[0] is record and cached[1] is metadata.brokers:
        return cached[2]  # type: ignore[return-value]
    encoded = response_element_encoder(3, version, "topics")(topic_metadata(metadata, record))
    metadata.encoded_topics[key] = (record, metadata.brokers, encoded)
    return encoded


def topic_metadata(metadata: MetadataCache, record: TopicRecord) -> dict[str, Any]:
    live = metadata.brokers
    partitions = []
    for index, state in enumerate(record.partitions):
        # as Kafka: a partition whose leader is not alive has LEADER_NOT_AVAILABLE
        code = ErrorCode.NONE if state.leader in live else ErrorCode.LEADER_NOT_AVAILABLE
        partitions.append({
            "error_code": int(code),
            "partition_index": index,
            "leader_id": state.leader if state.leader in live else -1,
            "leader_epoch": state.leader_epoch,
            "replica_nodes": state.replicas,
            "isr_nodes": state.isr,
            "offline_replicas": [b for b in state.replicas if b not in live],
        })
    return {
        "error_code": 0,
        "name": record.name,
        "topic_id": record.topic_id,
        "is_internal": record.name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": NOT_REQUESTED,
    }
