"""The `--members` and `--state` views of `pybroker consumer-groups --describe`, as
Kafka 4.0's kafka-consumer-groups.sh prints them, for classic and KIP-848 groups:

    --members:            GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID #PARTITIONS
    --members --verbose:  ... ASSIGNMENT (classic), or CURRENT-EPOCH CURRENT-ASSIGNMENT
                          TARGET-EPOCH TARGET-ASSIGNMENT (consumer groups)
    --state:              GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
    --state --verbose:    ... STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS (consumer)

Assignments print as `topic:0,1;other:2`. The epochs come from a ConsumerGroupDescribe
request to the group's coordinator (the admin client does not expose them); where
that fails (an older broker) they print as `-`.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

MISSING = "-"
CONSUMER_GROUP_DESCRIBE = 69


def assignment_text(pairs: list[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in pairs:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return MISSING
    return ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}"
                    for t, ps in sorted(by_topic.items()))


def describe_raw(host: str, port: int, group: str, timeout_s: float) -> dict[str, Any] | None:
    """One ConsumerGroupDescribe v0 to the coordinator; None when it cannot answer."""
    from pybroker.protocol import decode_response, encode_request

    try:
        parts = encode_request(CONSUMER_GROUP_DESCRIBE, 0, 1, "pybroker-consumer-groups",
                               {"group_ids": [group], "include_authorized_operations": False})
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"".join(bytes(p) for p in parts))
            size = struct.unpack(">i", _read(sock, 4))[0]
            _, body = decode_response(CONSUMER_GROUP_DESCRIBE, 0, _read(sock, size))
    except Exception:
        return None
    for described in body.get("groups") or []:
        if described["group_id"] == group and described["error_code"] == 0:
            return described
    return None


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return bytes(out)


def _pairs(assignment: Any) -> list[tuple[str, int]]:
    if assignment is None:
        return []
    return [(tp.topic, tp.partition) for tp in assignment.topic_partitions or []]


def member_rows(group: str, description: Any, raw: dict[str, Any] | None, *, consumer: bool,
                verbose: bool) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    with_instance = any(m.group_instance_id for m in description.members)
    columns = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) \
        + ["HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        columns += (["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                     "TARGET-ASSIGNMENT"] if consumer else ["ASSIGNMENT"])
    epochs = {m["member_id"]: m["member_epoch"] for m in (raw or {}).get("members", [])}
    target_epoch = (raw or {}).get("assignment_epoch", MISSING)
    rows = []
    for m in description.members:
        current = _pairs(m.assignment)
        row: list[Any] = [group, m.member_id]
        if with_instance:
            row.append(m.group_instance_id or MISSING)
        row += [m.host, m.client_id, len(current)]
        if verbose:
            if consumer:
                row += [epochs.get(m.member_id, MISSING), assignment_text(current),
                        target_epoch, assignment_text(_pairs(m.target_assignment))]
            else:
                row.append(assignment_text(current))
        rows.append(tuple(row))
    return tuple(columns), rows


def state_row(group: str, description: Any, raw: dict[str, Any] | None, state: str, *,
              consumer: bool, verbose: bool) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    node = description.coordinator
    coordinator = f"{node.host}:{node.port}  ({node.id})" if node is not None else MISSING
    columns = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    row: list[Any] = [group, coordinator, description.partition_assignor or "", state]
    if verbose and consumer:
        columns += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [(raw or {}).get("group_epoch", MISSING),
                (raw or {}).get("assignment_epoch", MISSING)]
    columns.append("#MEMBERS")
    row.append(len(description.members))
    return tuple(columns), [tuple(row)]
