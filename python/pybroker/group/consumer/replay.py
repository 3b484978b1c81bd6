"""Rebuilding KIP-848 groups from their `__consumer_offsets` records, and the
tombstones that delete them (record formats: records.py)."""

from __future__ import annotations

from pybroker.group.consumer import records as crec
from pybroker.group.consumer.state import ConsumerGroup, ConsumerMember, MemberState
from pybroker.group.offsets import Record


def apply(key: crec.ConsumerKey, value: bytes | None, groups: dict[str, ConsumerGroup]) -> None:
    """Apply one record read back from `__consumer_offsets`."""
    group = groups.get(key.group)
    if group is None:
        if value is None:
            return
        group = groups[key.group] = ConsumerGroup(key.group)
    t = key.type
    if t == crec.GROUP_METADATA:
        if value is None:
            del groups[key.group]
        else:
            group.group_epoch = crec.decode_epoch_value(value)
        return
    if t == crec.PARTITION_METADATA:
        group.subscription_metadata = ({} if value is None
                                       else crec.decode_partition_metadata_value(value))
        return
    if t == crec.REGULAR_EXPRESSION:
        if value is None:
            group.resolved_regexes.pop(key.member or "", None)
        else:
            group.resolved_regexes[key.member or ""] = crec.decode_regex_value(value)
        return
    if t == crec.TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = 0 if value is None else crec.decode_epoch_value(value)
        return
    member_id = key.member or ""
    if t == crec.TARGET_ASSIGNMENT_MEMBER:
        if value is None:
            group.target.pop(member_id, None)
        else:
            group.target[member_id] = crec.decode_target_member_value(value)
        return
    if value is None:
        if t == crec.MEMBER_METADATA:
            group.members.pop(member_id, None)
        return
    member = group.members.setdefault(member_id, ConsumerMember(member_id))
    if t == crec.MEMBER_METADATA:
        meta = crec.decode_member_metadata_value(value)
        member.instance_id, member.rack_id = meta.instance_id, meta.rack_id
        member.client_id, member.client_host = meta.client_id, meta.client_host
        member.subscribed_topic_names = list(meta.subscribed_topic_names)
        member.subscribed_topic_regex = meta.subscribed_topic_regex
        member.rebalance_timeout_ms = meta.rebalance_timeout_ms
        member.server_assignor = meta.server_assignor
    elif t == crec.CURRENT_MEMBER_ASSIGNMENT:
        current = crec.decode_current_assignment_value(value)
        member.member_epoch = current.member_epoch
        member.previous_member_epoch = current.previous_member_epoch
        try:
            member.state = MemberState(current.state)
        except ValueError:
            member.state = MemberState.UNKNOWN
        member.assigned = current.assigned
        member.pending_revocation = current.pending_revocation


def tombstones(group: ConsumerGroup) -> list[Record]:
    """Records deleting a consumer group's state (the group is deleted or dies)."""
    gid = group.group_id
    records: list[Record] = []
    for member_id in set(group.members) | set(group.target):
        for record_type in (crec.CURRENT_MEMBER_ASSIGNMENT, crec.TARGET_ASSIGNMENT_MEMBER,
                            crec.MEMBER_METADATA):
            records.append((crec.key(record_type, gid, member_id), None))
    for regex in group.resolved_regexes:
        records.append((crec.key(crec.REGULAR_EXPRESSION, gid, regex), None))
    for record_type in (crec.TARGET_ASSIGNMENT_METADATA, crec.PARTITION_METADATA,
                        crec.GROUP_METADATA):
        records.append((crec.key(record_type, gid), None))
    return records
