"""ConsumerGroupDescribe's view of a KIP-848 group: epochs, members, their current
and target assignments (topic ids with names)."""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.errors import ErrorCode
from pybroker.group.consumer.records import Assignment
from pybroker.group.consumer.state import ConsumerGroup

Body = dict[str, Any]
NO_OPERATIONS = -2147483648


def not_described(group_id: str, code: ErrorCode, message: str | None = None) -> Body:
    return {"error_code": int(code), "error_message": message, "group_id": group_id,
            "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
            "members": [], "authorized_operations": NO_OPERATIONS}


def described_group(group: ConsumerGroup, topics: dict[str, tuple[uuid.UUID, int]],
                    assignor: str) -> Body:
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    members = [{
        "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
        "member_epoch": m.member_epoch, "client_id": m.client_id,
        "client_host": m.client_host,
        "subscribed_topic_names": list(m.subscribed_topic_names),
        "subscribed_topic_regex": m.subscribed_topic_regex,
        "assignment": {"topic_partitions": _described(m.assigned, names)},
        "target_assignment": {"topic_partitions": _described(
            group.target.get(m.member_id, {}), names)},
    } for m in group.members.values()]
    return {"error_code": 0, "error_message": None, "group_id": group.group_id,
            "group_state": group.state, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "assignor_name": assignor,
            "members": members, "authorized_operations": NO_OPERATIONS}


def _described(assignment: Assignment, names: dict[uuid.UUID, str]) -> list[Body]:
    return [{"topic_id": topic_id, "topic_name": names.get(topic_id, ""),
             "partitions": sorted(parts)}
            for topic_id, parts in sorted(assignment.items(), key=lambda kv: kv[0].bytes)
            if parts]
