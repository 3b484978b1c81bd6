"""ControlledShutdown (7): a stopping broker's leaderships move away (controller)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import KafkaError
from pybroker.handlers.controller_only import active_controller
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(7, (1, 3))
async def handle_controlled_shutdown(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    try:
        # v1 carries no epoch (-1): refused, as a forged request would be
        remaining = await active_controller(ctx).controlled_shutdown(
            request.body["broker_id"], request.body["broker_epoch"])
    except KafkaError as exc:
        return {"error_code": int(exc.code), "remaining_partitions": []}
    return {"error_code": 0, "remaining_partitions": [
        {"topic_name": name, "partition_index": index} for name, index in remaining]}
