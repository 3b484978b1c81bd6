"""DeleteTopics (20): by name, or (v6+) by topic id.

Answered once the controller has removed the topic and this broker's metadata no
longer has it, not once its logs are deleted (admin/topics.py). As in Kafka 4.0,
whose controller drops a request whose deadline has passed before it gets to it, a
timeout of 0 or less answers REQUEST_TIMED_OUT for every topic and deletes nothing
(when deletion is disabled, that is said instead)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.registry import handles
from pybroker.protocol.types import ZERO_UUID

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(20, (1, 6))
async def handle_delete_topics(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    if request.version < 6:
        wanted = [(name, ZERO_UUID) for name in body["topic_names"]]
    else:
        wanted = [(t["name"], t["topic_id"]) for t in body["topics"]]
    responses = []
    timed_out = body["timeout_ms"] <= 0 and ctx.config["delete.topic.enable"]
    for name, topic_id in wanted:
        if timed_out:
            responses.append({"name": name, "topic_id": topic_id,
                              "error_code": int(ErrorCode.REQUEST_TIMED_OUT),
                              "error_message": None})
            continue
        try:
            name, topic_id = resolve(ctx, name, topic_id)
            await ctx.admin.delete_topic(name, body["timeout_ms"])
            code, message = ErrorCode.NONE, None
        except KafkaError as exc:
            code, message = exc.code, exc.message
        responses.append({"name": name, "topic_id": topic_id, "error_code": int(code),
                          "error_message": message})
    return {"throttle_time_ms": 0, "responses": responses}


def resolve(ctx: BrokerContext, name: str | None, topic_id: uuid.UUID
            ) -> tuple[str | None, uuid.UUID]:
    """(name, id) of a topic named by exactly one of them (Kafka's rules for v6)."""
    if name is not None and topic_id != ZERO_UUID:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "You may not specify both topic name and topic id.")
    if name is not None:
        record = ctx.metadata.topic(name)
        return name, record.topic_id if record is not None else ZERO_UUID
    record = ctx.metadata.topic_by_id(topic_id)
    if record is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "Topic id not found.")
    return record.name, topic_id
