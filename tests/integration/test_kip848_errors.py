"""KIP-848 error codes on the wire (requests built with pybroker's codec, answers
from a live broker): member epoch checks on OffsetCommit / OffsetFetch, the v9 rule
for KIP-848 members, and how each group kind looks to the other kind's APIs."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.protocol import decode_response, encode_request

from .groupclients import GroupMember, poll_until
from .helpers import create_topic
from .kip848clients import FAST_GROUPS

if TYPE_CHECKING:
    from conftest import BrokerFactory


class Client:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.corr = 0

    def call(self, key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.corr += 1
        self.sock.sendall(b"".join(bytes(p) for p in
                                   encode_request(key, version, self.corr, "t", body)))
        size = struct.unpack(">i", self._read(4))[0]
        corr, answer = decode_response(key, version, self._read(size))
        assert corr == self.corr
        return answer

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out


def heartbeat(c: Client, group: str, member: str, epoch: int, **kw: Any) -> dict[str, Any]:
    body = {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None}
    body.update(kw)
    return c.call(68, 1, body)


def commit(c: Client, version: int, group: str, member: str, epoch: int, topic: str) -> int:
    answer = c.call(8, version, {
        "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member,
        "group_instance_id": None, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]})
    return int(answer["topics"][0]["partitions"][0]["error_code"])


def fetch(c: Client, group: str, member: str | None, epoch: int) -> dict[str, Any]:
    answer = c.call(9, 9, {"groups": [{"group_id": group, "member_id": member,
                                       "member_epoch": epoch, "topics": None}],
                           "require_stable": False})
    return dict(answer["groups"][0])


def test_member_epochs_and_group_kinds_on_the_wire(broker_factory: BrokerFactory,
                                                   topic_name: str) -> None:
    b = broker_factory(FAST_GROUPS)
    create_topic(b.bootstrap, topic_name, 2)
    c = Client(b.bootstrap)
    deadline = time.monotonic() + 30  # the first FindCoordinator creates __consumer_offsets
    while c.call(10, 1, {"key": "wire", "key_type": 0})["error_code"] != 0:
        assert time.monotonic() < deadline, "no coordinator"
        time.sleep(0.1)
    member = uuid.uuid4().hex
    joined = heartbeat(c, "wire", member, 0, subscribed_topic_names=[topic_name],
                       topic_partitions=[])
    assert joined["error_code"] == 0 and joined["member_epoch"] == 1
    assert sorted(joined["assignment"]["topic_partitions"][0]["partitions"]) == [0, 1]
    epoch = joined["member_epoch"]

    assert commit(c, 9, "wire", member, epoch, topic_name) == ErrorCode.NONE
    assert commit(c, 9, "wire", member, epoch - 1, topic_name) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(c, 9, "wire", "stranger", epoch, topic_name) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(c, 7, "wire", member, epoch, topic_name) == ErrorCode.UNSUPPORTED_VERSION
    assert commit(c, 9, "wire", "", -1, topic_name) == ErrorCode.UNKNOWN_MEMBER_ID  # not empty

    assert fetch(c, "wire", member, epoch)["topics"][0]["partitions"][0]["committed_offset"] == 3
    assert fetch(c, "wire", member, epoch + 1)["error_code"] == ErrorCode.STALE_MEMBER_EPOCH
    assert fetch(c, "wire", "stranger", epoch)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert fetch(c, "wire", None, -1)["error_code"] == 0  # an admin's fetch

    assert heartbeat(c, "wire", member, epoch + 5)["error_code"] == \
        ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat(c, "wire", member, 0, subscribed_topic_names=[topic_name],
                     topic_partitions=[], server_assignor="nope")["error_code"] == \
        ErrorCode.UNSUPPORTED_ASSIGNOR

    # a classic member of a live classic group, and each kind seen by the other's APIs
    classic = GroupMember(b.bootstrap, "old-style", [topic_name])
    try:
        poll_until([classic], lambda: len(classic.assignment) == 2, what="the classic join")
        assert heartbeat(c, "old-style", uuid.uuid4().hex, 0,
                         subscribed_topic_names=[topic_name], topic_partitions=[]
                         )["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        described = c.call(69, 0, {"group_ids": ["old-style", "wire"],
                                    "include_authorized_operations": False})["groups"]
        assert described[0]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        assert described[1]["error_code"] == 0 and described[1]["group_state"] == "Stable"
        assert [m["member_id"] for m in described[1]["members"]] == [member]
        old = c.call(15, 4, {"groups": ["wire"], "include_authorized_operations": False})
        assert old["groups"][0]["group_state"] == "Dead"  # Kafka: not a classic group
        join = c.call(11, 5, {"group_id": "wire", "session_timeout_ms": 10000,
                              "rebalance_timeout_ms": 10000, "member_id": "",
                              "group_instance_id": None, "protocol_type": "consumer",
                              "protocols": [{"name": "range", "metadata": b""}]})
        assert join["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        listed = c.call(16, 5, {"states_filter": [], "types_filter": ["consumer"]})["groups"]
        assert [(g["group_id"], g["group_type"], g["group_state"]) for g in listed] == \
            [("wire", "consumer", "Stable")]
        listed = c.call(16, 5, {"states_filter": ["stable"], "types_filter": ["classic"]})
        assert [g["group_id"] for g in listed["groups"]] == ["old-style"]
    finally:
        classic.close()
    left = heartbeat(c, "wire", member, -1)
    assert left["error_code"] == 0 and left["member_epoch"] == -1
    # empty now: an admin may commit, and a classic member may take the group over
    assert commit(c, 9, "wire", "", -1, topic_name) == ErrorCode.NONE
