"""Bad input to the group coordinator over raw sockets: Kafka's error codes,
and the coordinator keeps serving."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from . import grouprawclient as g
from .helpers import create_topic
from .rawclient import RawClient

if TYPE_CHECKING:
    from conftest import BrokerFactory

NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE = 0, 3, 12
COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL = 15, 22, 23
INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT = 24, 25, 26
REBALANCE_IN_PROGRESS, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED = 27, 68, 69, 79


def join(c: RawClient, group: str, **kw: object) -> dict[str, object]:
    return g.parse_join_group_v5(c.request(g.JOIN_GROUP, 5, g.join_group_v5(group, **kw)))


def heartbeat(c: RawClient, group: str, generation: int, member: str) -> int:
    return g.parse_error_after_throttle(
        c.request(g.HEARTBEAT, 3, g.heartbeat_v3(group, generation, member)))


def commit(c: RawClient, group: str, generation: int, member: str,
           topics: list[tuple[str, list[tuple[int, int, str | None]]]]) -> dict[tuple[str, int],
                                                                          int]:
    return g.parse_offset_commit_v2(
        c.request(g.OFFSET_COMMIT, 2, g.offset_commit_v2(group, generation, member, topics)))


def test_group_error_codes(broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(group_initial_rebalance_delay_ms=0)
    create_topic(b.bootstrap, topic_name, 2)
    with RawClient(b.bootstrap) as c:
        error, node, host, port = g.parse_find_coordinator_v1(
            c.request(g.FIND_COORDINATOR, 1, g.find_coordinator_v1("grp", 0)))
        assert (error, node, port) == (NONE, 0, b.port)
        # a transactional id's coordinator (issue 13): the one broker here too
        error, node, host, port = g.parse_find_coordinator_v1(
            c.request(g.FIND_COORDINATOR, 1, g.find_coordinator_v1("txn", 1)))
        assert (error, node, port) == (NONE, 0, b.port)

        assert join(c, "")["error"] == INVALID_GROUP_ID
        assert join(c, "grp", session_ms=1000)["error"] == INVALID_SESSION_TIMEOUT
        assert join(c, "grp", session_ms=10 ** 9)["error"] == INVALID_SESSION_TIMEOUT
        assert join(c, "grp", member_id="nobody")["error"] == UNKNOWN_MEMBER_ID
        first = join(c, "grp")
        assert first["error"] == MEMBER_ID_REQUIRED and first["member_id"]
        member = str(first["member_id"])
        joined = join(c, "grp", member_id=member)
        assert joined["error"] == NONE and joined["leader"] == member
        generation = int(joined["generation"])  # type: ignore[call-overload]
        assert [m[0] for m in joined["members"]] == [member]  # type: ignore[attr-defined]
        error, assignment = g.parse_sync_group_v3(c.request(
            g.SYNC_GROUP, 3, g.sync_group_v3("grp", generation, member, [(member, b"A")])))
        assert (error, assignment) == (NONE, b"A")
        error, _ = g.parse_sync_group_v3(c.request(
            g.SYNC_GROUP, 3, g.sync_group_v3("grp", generation + 7, member, [])))
        assert error == ILLEGAL_GENERATION

        # a different protocol type, or no protocol in common
        assert join(c, "grp", protocol_type="connect")["error"] == INCONSISTENT_GROUP_PROTOCOL
        assert join(c, "grp", protocols=[("other", b"")])["error"] == (
            INCONSISTENT_GROUP_PROTOCOL)
        assert heartbeat(c, "grp", generation, "nobody") == UNKNOWN_MEMBER_ID
        assert heartbeat(c, "grp", generation + 1, member) == ILLEGAL_GENERATION
        assert heartbeat(c, "grp", generation, member) == NONE

        codes = commit(c, "grp", generation, member, [
            (topic_name, [(0, 5, "meta"), (1, 6, "x" * 5000), (9, 1, None)]),
            ("no-such-topic", [(0, 1, None)])])
        assert codes == {(topic_name, 0): NONE, (topic_name, 1): OFFSET_METADATA_TOO_LARGE,
                         (topic_name, 9): UNKNOWN_TOPIC_OR_PARTITION,
                         ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert commit(c, "grp", generation + 1, member, [(topic_name, [(0, 1, None)])]) == {
            (topic_name, 0): ILLEGAL_GENERATION}
        assert commit(c, "grp", generation, "nobody", [(topic_name, [(0, 1, None)])]) == {
            (topic_name, 0): UNKNOWN_MEMBER_ID}
        # standalone commits (assign()-only clients, kcat) into a group with no members
        assert commit(c, "solo", -1, "", [(topic_name, [(1, 42, "m")])]) == {
            (topic_name, 1): NONE}
        fetched = g.parse_offset_fetch_v1(c.request(
            g.OFFSET_FETCH, 1, g.offset_fetch_v1("solo", [(topic_name, [0, 1])])))
        assert fetched == {(topic_name, 0): (-1, "", NONE), (topic_name, 1): (42, "m", NONE)}

        # a second member joining makes the first one's heartbeat see the rebalance
        with RawClient(b.bootstrap) as c2:
            c2_member = str(join(c2, "grp")["member_id"])
            result: dict[str, object] = {}
            t = threading.Thread(target=lambda: result.update(
                join(c2, "grp", member_id=c2_member)))
            t.start()
            try:
                for _ in range(50):
                    if heartbeat(c, "grp", generation, member) == REBALANCE_IN_PROGRESS:
                        break
                    threading.Event().wait(0.05)
                else:
                    raise AssertionError("heartbeat never reported the rebalance")
                rejoined = join(c, "grp", member_id=member)
                t.join(10)
            finally:
                t.join(10)
            assert rejoined["error"] == NONE and result["error"] == NONE
            assert rejoined["generation"] == result["generation"] == generation + 1
            assert rejoined["leader"] == member
            # the group now completes the rebalance (no SyncGroup yet). As in Kafka,
            # the generation is checked first: a commit of the old generation gets
            # ILLEGAL_GENERATION (the client rejoins), the new one REBALANCE_IN_PROGRESS
            assert commit(c, "grp", generation, member, [(topic_name, [(0, 7, None)])]) == {
                (topic_name, 0): ILLEGAL_GENERATION}
            assert commit(c, "grp", generation + 1, member, [(topic_name, [(0, 7, None)])]) == {
                (topic_name, 0): REBALANCE_IN_PROGRESS}

        deleted = g.parse_delete_groups_v0(c.request(
            g.DELETE_GROUPS, 0, g.delete_groups_v0(["grp", "solo", "unknown", ""])))
        assert deleted == {"grp": NON_EMPTY_GROUP, "solo": NONE, "unknown": GROUP_ID_NOT_FOUND,
                           "": INVALID_GROUP_ID}
        fetched = g.parse_offset_fetch_v1(c.request(
            g.OFFSET_FETCH, 1, g.offset_fetch_v1("solo", [(topic_name, [1])])))
        assert fetched == {(topic_name, 1): (-1, "", NONE)}
        assert c.api_versions().error_code == 0


def test_concurrent_first_find_coordinators_create_the_offsets_topic_once(
        broker_factory: BrokerFactory) -> None:
    """Clients starting together on a fresh broker all ask FindCoordinator first; each
    may try to create __consumer_offsets. The losers of that race must not fail (Kafka
    treats TOPIC_ALREADY_EXISTS as done) and the broker must not log a failure."""
    b = broker_factory()
    clients = [RawClient(b.bootstrap) for _ in range(8)]
    try:
        for i, rc in enumerate(clients):
            rc.send(g.FIND_COORDINATOR, 1, g.find_coordinator_v1(f"first-{i}", 0))
        answers = [g.parse_find_coordinator_v1(rc.recv()[1]) for rc in clients]
    finally:
        for rc in clients:
            rc.close()
    # NONE, or COORDINATOR_NOT_AVAILABLE while the topic's partitions come up
    assert {a[0] for a in answers} <= {0, 15}, answers

    def found() -> bool:
        with RawClient(b.bootstrap) as rc:
            return g.parse_find_coordinator_v1(rc.request(
                g.FIND_COORDINATOR, 1, g.find_coordinator_v1("first-0", 0)))[0] == 0

    deadline = time.monotonic() + 30
    while not found():
        assert time.monotonic() < deadline, "no coordinator within 30 s"
        time.sleep(0.1)
    log = b.log_path.read_text(errors="replace")
    assert "creating the offsets topic failed" not in log, log[-3000:]
