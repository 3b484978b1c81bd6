"""ElectLeaders (43): preferred or unclean leader election (controller)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode, KafkaError
from pybroker.handlers.controller_only import active_controller, forwarded
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(43, (0, 2))
async def handle_elect_leaders(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    asked = body["topic_partitions"]
    wanted = None if asked is None else [(t["topic"], p) for t in asked for p in t["partitions"]]
    election_type = body.get("election_type", 0)
    if election_type not in (0, 1):
        return _failed(ErrorCode.INVALID_REQUEST, wanted)
    try:
        answer = await forwarded(ctx, request)
        if answer is not None:
            return answer
        results = await active_controller(ctx).elect_leaders(election_type, wanted)
    except KafkaError as exc:
        return _failed(exc.code, wanted)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, index), error in results.items():
        topics.setdefault(name, []).append({
            "partition_id": index, "error_code": 0 if error is None else int(error.code),
            "error_message": None if error is None else error.message})
    return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": [
        {"topic": n, "partition_result": ps} for n, ps in topics.items()]}


def _failed(code: ErrorCode, wanted: list[tuple[str, int]] | None) -> dict[str, Any]:
    """The whole request failed: its code at the top and on every partition asked."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index in wanted or []:
        topics.setdefault(name, []).append({"partition_id": index, "error_code": int(code),
                                            "error_message": None})
    return {"throttle_time_ms": 0, "error_code": int(code), "replica_election_results": [
        {"topic": n, "partition_result": ps} for n, ps in topics.items()]}
