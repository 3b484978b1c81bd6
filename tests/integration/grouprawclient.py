"""Raw encoders/decoders of the group APIs (non-flexible versions) over rawclient."""

from __future__ import annotations

from .rawclient import Reader, array, bytes_, i8, i32, i64, string

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DELETE_GROUPS = 8, 9, 42


def find_coordinator_v1(key: str, key_type: int) -> bytes:
    return string(key) + i8(key_type)


def parse_find_coordinator_v1(body: bytes) -> tuple[int, int, str | None, int]:
    r = Reader(body)
    r.i32()
    error = r.i16()
    r.string()
    node = r.i32()
    host = r.string()
    return error, node, host, r.i32()


def join_group_v5(group: str, member_id: str = "", instance_id: str | None = None,
                  session_ms: int = 10000, rebalance_ms: int = 10000,
                  protocol_type: str = "consumer",
                  protocols: list[tuple[str, bytes]] | None = None) -> bytes:
    protos = protocols if protocols is not None else [("range", b"\x00\x00\x00\x00\x00\x00")]
    return (string(group) + i32(session_ms) + i32(rebalance_ms) + string(member_id)
            + string(instance_id) + string(protocol_type)
            + array([string(n) + bytes_(m) for n, m in protos]))


def parse_join_group_v5(body: bytes) -> dict[str, object]:
    r = Reader(body)
    r.i32()
    out: dict[str, object] = {"error": r.i16(), "generation": r.i32(), "protocol": r.string(),
                              "leader": r.string(), "member_id": r.string()}
    out["members"] = [(r.string(), r.string(), r.bytes_()) for _ in range(r.i32())]
    return out


def sync_group_v3(group: str, generation: int, member_id: str,
                  assignments: list[tuple[str, bytes]]) -> bytes:
    return (string(group) + i32(generation) + string(member_id) + string(None)
            + array([string(m) + bytes_(a) for m, a in assignments]))


def parse_sync_group_v3(body: bytes) -> tuple[int, bytes | None]:
    r = Reader(body)
    r.i32()
    return r.i16(), r.bytes_()


def heartbeat_v3(group: str, generation: int, member_id: str) -> bytes:
    return string(group) + i32(generation) + string(member_id) + string(None)


def parse_error_after_throttle(body: bytes) -> int:
    r = Reader(body)
    r.i32()
    return r.i16()


def offset_commit_v2(group: str, generation: int, member_id: str,
                     topics: list[tuple[str, list[tuple[int, int, str | None]]]]) -> bytes:
    return (string(group) + i32(generation) + string(member_id) + i64(-1)
            + array([string(t) + array([i32(p) + i64(o) + string(m) for p, o, m in parts])
                     for t, parts in topics]))


def parse_offset_commit_v2(body: bytes) -> dict[tuple[str, int], int]:
    r = Reader(body)
    out = {}
    for _ in range(r.i32()):
        name = r.string() or ""
        for _ in range(r.i32()):
            index = r.i32()
            out[(name, index)] = r.i16()
    return out


def offset_fetch_v1(group: str, topics: list[tuple[str, list[int]]]) -> bytes:
    return string(group) + array([string(t) + array([i32(p) for p in parts])
                                  for t, parts in topics])


def parse_offset_fetch_v1(body: bytes) -> dict[tuple[str, int], tuple[int, str | None, int]]:
    r = Reader(body)
    out = {}
    for _ in range(r.i32()):
        name = r.string() or ""
        for _ in range(r.i32()):
            index = r.i32()
            out[(name, index)] = (r.i64(), r.string(), r.i16())
    return out


def delete_groups_v0(groups: list[str]) -> bytes:
    return array([string(g) for g in groups])


def parse_delete_groups_v0(body: bytes) -> dict[str, int]:
    r = Reader(body)
    r.i32()
    return {(r.string() or ""): r.i16() for _ in range(r.i32())}
