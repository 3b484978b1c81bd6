"""DescribeGroups (15): state, protocol and members (with assignments when Stable)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.group.state import GroupState
from pybroker.handlers.registry import handles
from pybroker.security.acls import ResourceType
from pybroker.security.authorizer import authorizer_for
from pybroker.security.operations import authorized_operations

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

NO_OPERATIONS = -2147483648


@handles(15, (0, 4))
async def handle_describe_groups(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    groups = [describe(ctx, g) for g in request.body["groups"] or []]
    if request.version >= 3 and request.body["include_authorized_operations"]:
        with_operations(ctx, request, groups)
    return {"throttle_time_ms": 0, "groups": groups}


def with_operations(ctx: BrokerContext, request: Request, groups: list[dict[str, Any]]
                    ) -> None:
    """Fill in the operations the principal has on each group described (KIP-430)."""
    authorizer = authorizer_for(ctx.config, ctx.admin.backend)
    for group in groups:
        if group["error_code"] == 0:
            group["authorized_operations"] = authorized_operations(
                authorizer, request.connection, ResourceType.GROUP, group["group_id"])


def describe(ctx: BrokerContext, group_id: str) -> dict[str, Any]:
    if not group_id:
        return {"error_code": int(ErrorCode.INVALID_GROUP_ID), "group_id": group_id,
                "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                "authorized_operations": NO_OPERATIONS}
    group = ctx.groups.describe_group(group_id)
    if group is None:
        return {"error_code": 0, "group_id": group_id, "group_state": GroupState.DEAD.value,
                "protocol_type": "", "protocol_data": "", "members": [],
                "authorized_operations": NO_OPERATIONS}
    stable = group.is_(GroupState.STABLE)
    members = [{
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "member_metadata": m.metadata(group.protocol) if stable else b"",
        "member_assignment": m.assignment if stable else b"",
    } for m in group.members.values()]
    return {"error_code": 0, "group_id": group_id, "group_state": group.state.value,
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol or "") if stable else "",
            "members": members, "authorized_operations": NO_OPERATIONS}
