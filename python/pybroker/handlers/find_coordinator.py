"""FindCoordinator (10): every group is coordinated by this broker; transactions
have no coordinator yet."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.broker import Broker
    from pybroker.server.dispatch import Request

KEY_TYPE_GROUP = 0


@handles(10, (0, 2))
async def handle_find_coordinator(broker: Broker, request: Request) -> dict[str, Any]:
    key_type = request.body["key_type"] if request.version >= 1 else KEY_TYPE_GROUP
    if key_type != KEY_TYPE_GROUP:
        code = (ErrorCode.COORDINATOR_NOT_AVAILABLE if key_type == 1
                else ErrorCode.INVALID_REQUEST)
        return {"throttle_time_ms": 0, "error_code": int(code), "error_message": code.name,
                "node_id": -1, "host": "", "port": -1}
    if not request.body["key"] and request.version >= 1:
        code = ErrorCode.INVALID_REQUEST
        return {"throttle_time_ms": 0, "error_code": int(code),
                "error_message": "group id must not be empty", "node_id": -1, "host": "",
                "port": -1}
    broker.groups.store_ready()
    host, port = broker.advertised_host_port
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "node_id": broker.broker_id, "host": host, "port": port}
