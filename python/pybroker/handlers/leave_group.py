"""LeaveGroup (13): members leave (v3+: several at once, by member or instance id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(13, (0, 3))
async def handle_leave_group(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    body = request.body
    if request.version < 3:
        top, codes = ctx.groups.leave_group(body["group_id"], [(body["member_id"], None)])
        code = top if top else codes[0]
        return {"throttle_time_ms": 0, "error_code": int(code), "members": []}
    leaving = [(m["member_id"] or "", m["group_instance_id"]) for m in body["members"] or []]
    top, codes = ctx.groups.leave_group(body["group_id"], leaving)
    members = [{"member_id": member_id, "group_instance_id": instance_id,
                "error_code": int(code)}
               for (member_id, instance_id), code in zip(leaving, codes, strict=True)]
    return {"throttle_time_ms": 0, "error_code": int(top), "members": members}
