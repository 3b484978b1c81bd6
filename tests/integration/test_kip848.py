"""KIP-848 consumer groups with real clients: confluent-kafka consumers with
group.protocol=consumer join, split partitions, hand them over when a member
leaves without stopping the others, resume from committed offsets after a broker
restart, rejoin as static members; a classic and a KIP-848 group side by side,
and the consumer-groups tool on both kinds."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import ConsumerGroupType, TopicPartition, libversion

from .groupclients import GroupMember
from .helpers import admin, assert_delivered, create_topic, produce_all, producer
from .kip848clients import FAST_GROUPS, Member848, poll_until

if TYPE_CHECKING:
    from conftest import BrokerFactory

# librdkafka has group.protocol=consumer GA since 2.10 (ConsumerGroupHeartbeat v1)
pytestmark = pytest.mark.skipif(libversion()[1] < 0x020A0000,
                                reason="librdkafka < 2.10 has no GA KIP-848 consumer")


def test_members_split_partitions_and_hand_over_without_stopping(
        broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(FAST_GROUPS)
    create_topic(b.bootstrap, topic_name, 6)
    p = producer(b.bootstrap)
    sent = 0
    last = 0.0

    def produce_some() -> None:  # a steady trickle: 6 records every 50 ms
        nonlocal sent, last
        if time.monotonic() - last < 0.05:
            return
        last = time.monotonic()
        for partition in range(6):
            p.produce(topic_name, value=b"%d" % sent, partition=partition)
            sent += 1
        p.poll(0)

    members = [Member848(b.bootstrap, "g848", [topic_name], client_id=f"m{i}")
               for i in range(3)]
    try:
        poll_until(members, lambda: [len(m.assignment) for m in members] == [2, 2, 2],
                   between=produce_some, what="an even split of 6 partitions over 3 members")
        assert set().union(*(m.assignment for m in members)) == {(topic_name, i)
                                                                 for i in range(6)}
        stay, leaving = members[:2], members[2]
        before = [set(m.assignment) for m in stay]
        counts = [len(m.messages) for m in stay]
        leaving.close()
        # the others keep consuming while the leaver's partitions move to them
        poll_until(stay, lambda: sum(len(m.assignment) for m in stay) == 6,
                   between=produce_some, what="the hand-over")
        during = [len(m.messages) - c for m, c in zip(stay, counts, strict=True)]
        for m, kept in zip(stay, before, strict=True):
            assert kept <= m.assignment, "a member lost its own partitions in the hand-over"
            assert not (m.revoked & kept), "a member had to stop for the hand-over"
        assert all(n > 0 for n in during), f"a member stopped consuming: {during}"
        assert [len(m.assignment) for m in stay] == [3, 3]
        assert p.flush(10) == 0
        # every record sent is consumed in the end (the leaver committed nothing, so its
        # partitions are read again from the start by their new owners)
        def seen() -> set[bytes | None]:
            return {v for m in stay for *_, v in m.messages}

        poll_until(stay, lambda: len(seen()) >= sent,
                   what=f"every record ({sent} sent)")
        assert seen() == {b"%d" % i for i in range(sent)}
    finally:
        for m in stay:
            m.close()


def test_resume_from_committed_offsets_after_restart(broker_factory: BrokerFactory,
                                                     topic_name: str) -> None:
    b = broker_factory(FAST_GROUPS)
    create_topic(b.bootstrap, topic_name, 2)
    first = [{"value": b"a%d" % i, "partition": i % 2} for i in range(20)]
    assert_delivered(produce_all(producer(b.bootstrap), topic_name, first))
    m = Member848(b.bootstrap, "resume", [topic_name])
    poll_until([m], lambda: len(m.messages) >= 20, what="the first 20 records")
    m.consumer.commit(asynchronous=False)
    m.close()
    b.restart()
    second = [{"value": b"b%d" % i, "partition": i % 2} for i in range(10)]
    assert_delivered(produce_all(producer(b.bootstrap), topic_name, second))
    again = Member848(b.bootstrap, "resume", [topic_name])
    try:
        poll_until([again], lambda: len(again.messages) >= 10, what="the new records")
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # nothing older may follow
            again.poll()
        assert sorted(v for *_, v in again.messages) == sorted(r["value"] for r in second)
        committed = again.consumer.committed([TopicPartition(topic_name, i) for i in range(2)],
                                             timeout=10)
        assert [tp.offset for tp in committed] == [10, 10]
    finally:
        again.close()


def test_static_member_rejoins_with_its_partitions(broker_factory: BrokerFactory,
                                                   topic_name: str) -> None:
    b = broker_factory(FAST_GROUPS)
    create_topic(b.bootstrap, topic_name, 4)
    static = Member848(b.bootstrap, "static", [topic_name], group_instance_id="inst-1")
    other = Member848(b.bootstrap, "static", [topic_name])
    try:
        poll_until([static, other],
                   lambda: len(static.assignment) == 2 and len(other.assignment) == 2,
                   what="an even split")
        held = set(static.assignment)
        static.close()  # leaves with epoch -2: its partitions wait for it
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            other.poll()
        assert not (other.assignment & held), "a static member's partitions moved"
        back = Member848(b.bootstrap, "static", [topic_name], group_instance_id="inst-1")
        poll_until([back, other], lambda: back.assignment == held, what="the rejoin")
        assert len(other.assignment) == 2
        back.close()
    finally:
        other.close()


def tool(bootstrap: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pybroker", "consumer-groups",
                           "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def rows(out: str) -> list[list[str]]:
    lines = [line.split() for line in out.splitlines() if line.strip()]
    start = next(i for i, row in enumerate(lines) if row and row[0] == "GROUP")
    return lines[start:]


def test_classic_and_kip848_groups_side_by_side_and_the_tool(
        broker_factory: BrokerFactory, topic_name: str) -> None:
    b = broker_factory(FAST_GROUPS)
    create_topic(b.bootstrap, topic_name, 4)
    records = [{"value": b"v%d" % i, "partition": i % 4} for i in range(40)]
    assert_delivered(produce_all(producer(b.bootstrap), topic_name, records))
    classic = [GroupMember(b.bootstrap, "classic-g", [topic_name], client_id=f"c{i}")
               for i in range(2)]
    modern = [Member848(b.bootstrap, "modern-g", [topic_name], client_id=f"k{i}",
                        group_instance_id="inst-k0" if i == 0 else None)
              for i in range(2)]
    try:
        def both() -> None:
            for m in classic:
                m.poll()

        def distinct(group: list) -> int:  # type: ignore[type-arg]
            return len({(msg[-3], msg[-2]) for m in group for msg in m.messages})

        poll_until(modern, lambda: distinct(modern) >= 40 and distinct(classic) >= 40
                   and [len(m.assignment) for m in modern] == [2, 2]
                   and [len(m.assignment) for m in classic] == [2, 2],
                   between=both, what="both groups consuming everything")
        for m in classic + modern:  # type: ignore[operator]
            m.consumer.commit(asynchronous=False)
        client = admin(b.bootstrap)  # kept: a collected client cancels its requests
        listed = client.list_consumer_groups(request_timeout=10).result()
        kinds = {g.group_id: g.type for g in listed.valid}
        assert "classic-g" in kinds, (kinds, listed.errors)
        assert kinds["classic-g"] == ConsumerGroupType.CLASSIC
        assert kinds["modern-g"] == ConsumerGroupType.CONSUMER
        only = client.list_consumer_groups(types={ConsumerGroupType.CONSUMER},
                                           request_timeout=10).result()
        assert {g.group_id for g in only.valid} == {"modern-g"}  # ListGroups v5 types filter

        for group in ("classic-g", "modern-g"):
            offsets = rows(tool(b.bootstrap, "--describe", "--group", group))
            assert offsets[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                  "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
            assert sorted(r[2] for r in offsets[1:]) == ["0", "1", "2", "3"]
            assert all(r[3] == "10" and r[5] == "0" for r in offsets[1:]), offsets
            state = rows(tool(b.bootstrap, "--describe", "--group", group, "--state"))
            assert state[0][:5] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY",
                                    "STATE"]
            assert state[1][-2:] == ["Stable", "2"]
        verbose = rows(tool(b.bootstrap, "--describe", "--group", "modern-g", "--state",
                            "--verbose"))
        assert verbose[0][-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert verbose[1][3] == "uniform" and verbose[1][4] == "Stable"
        members = rows(tool(b.bootstrap, "--describe", "--group", "modern-g", "--members",
                            "--verbose"))
        assert members[0] == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                              "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT",
                              "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        by_client = {r[4]: r for r in members[1:]}
        assert set(by_client) == {"k0", "k1"} and by_client["k0"][2] == "inst-k0"
        for r in members[1:]:
            assert r[5] == "2" and r[6] == r[8] and r[7] == r[9]
            assert r[7].startswith(f"{topic_name}:")
        classic_members = rows(tool(b.bootstrap, "--describe", "--group", "classic-g",
                                    "--members", "--verbose"))
        assert classic_members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                      "#PARTITIONS", "ASSIGNMENT"]
        assert sorted(r[3] for r in classic_members[1:]) == ["c0", "c1"]
    finally:
        for m in classic + modern:  # type: ignore[operator]
            m.close()


def test_regex_subscription_follows_new_topics(broker_factory: BrokerFactory,
                                               topic_name: str) -> None:
    """A topic created after the regex was resolved is matched by a heartbeat past
    the 10 s between two resolutions of a group's regexes (Kafka's minimum)."""
    b = broker_factory(FAST_GROUPS)
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(b.bootstrap, first, 2)
    create_topic(b.bootstrap, "unrelated", 1)
    m = Member848(b.bootstrap, "regex", [f"^{topic_name}-.*"])
    try:
        poll_until([m], lambda: m.assignment == {(first, 0), (first, 1)},
                   what="the matching topic")
        create_topic(b.bootstrap, second, 1)  # the broker resolves the regex again
        poll_until([m], lambda: m.assignment == {(first, 0), (first, 1), (second, 0)},
                   what="the new matching topic")
    finally:
        m.close()


def test_literal_topics_come_first_then_the_regexs(broker_factory: BrokerFactory,
                                                   topic_name: str) -> None:
    """Kafka 4 resolves a new regex off the heartbeat: the heartbeat that brings it
    assigns the literal topics, a later one the regex's (librdkafka's 0045
    resubscribe_with_regex asserts these two steps); then a resubscription from the
    regex to another moves the member to the other's topics."""
    b = broker_factory(FAST_GROUPS)
    literal, matched, other = f"{topic_name}-lit", f"re-{topic_name}-x", f"alt-{topic_name}"
    create_topic(b.bootstrap, literal, 2)
    create_topic(b.bootstrap, matched, 3)
    create_topic(b.bootstrap, other, 1)
    m = Member848(b.bootstrap, "steps", [f"^re-{topic_name}-.*", literal])
    try:
        everything = {(literal, 0), (literal, 1), (matched, 0), (matched, 1), (matched, 2)}
        poll_until([m], lambda: m.assignment == everything, what="both steps")
        assert m.assigned_steps[0] == {(literal, 0), (literal, 1)}, m.assigned_steps
        m.resubscribe([f"^alt-{topic_name}$"])
        poll_until([m], lambda: m.assignment == {(other, 0)}, what="the other regex's topic")
    finally:
        m.close()


def test_a_regex_matches_only_topics_the_member_may_describe(
        broker_factory: BrokerFactory, topic_name: str) -> None:
    """With an authorizer, a resolution keeps the topics the member's principal may
    DESCRIBE (Kafka's filterTopicDescribeAuthorizedTopics): a DENY hides a matching
    topic from the member's assignment."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    from pybroker.tools._group_views import describe_raw

    b = broker_factory({**FAST_GROUPS,
                        "authorizer.class.name":
                            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                        "allow.everyone.if.no.acl.found": "true"})
    shown, hidden = f"{topic_name}-shown", f"{topic_name}-hidden"
    create_topic(b.bootstrap, shown, 2)
    create_topic(b.bootstrap, hidden, 2)
    deny = AclBinding(ResourceType.TOPIC, hidden, ResourcePatternType.LITERAL,
                      "User:ANONYMOUS", "*", AclOperation.DESCRIBE, AclPermissionType.DENY)
    client = admin(b.bootstrap)
    for fut in client.create_acls([deny], request_timeout=30).values():
        fut.result(timeout=30)
    m = Member848(b.bootstrap, "acl-regex", [f"^{topic_name}-.*"])
    try:
        poll_until([m], lambda: bool(m.assignment), what="the regex's topics")
        assert m.assignment == {(shown, 0), (shown, 1)}, m.assigned_steps
        # the client would leave out a topic its Metadata does not show: what the
        # broker targets is in ConsumerGroupDescribe (the resolution is applied at
        # once, so a hidden topic would be in the same target)
        described = describe_raw("127.0.0.1", b.port, "acl-regex", 10)
        assert described is not None
        [member] = described["members"]
        assert {tp["topic_name"] for tp in member["target_assignment"]["topic_partitions"]} \
            == {shown}
    finally:
        m.close()


def test_resolved_regexes_are_group_state_that_survives_a_restart(
        broker_factory: BrokerFactory, topic_name: str) -> None:
    """The resolution is kept in __consumer_offsets as Kafka's
    ConsumerGroupRegularExpression record (key type 16): after a restart the group
    carries on at the same epoch with the same partitions."""
    from pybroker.group.consumer import records as crec
    from pybroker.tools._group_views import describe_raw

    b = broker_factory(FAST_GROUPS)
    create_topic(b.bootstrap, f"{topic_name}-1", 2)
    regex = f"^{topic_name}-.*"
    m = Member848(b.bootstrap, "kept", [regex])
    try:
        poll_until([m], lambda: len(m.assignment) == 2, what="the regex's topic")
        before = describe_raw("127.0.0.1", b.port, "kept", 10)
        assert before is not None
        b.restart()
        stored = _regex_records(b.bootstrap, "kept")
        # the regex as the member sent it (librdkafka wraps its patterns in a group)
        sent = before["members"][0]["subscribed_topic_regex"]
        assert regex in sent
        assert stored and stored[-1][0] == sent and stored[-1][1] is not None
        assert crec.decode_regex_value(stored[-1][1]).topics == {f"{topic_name}-1"}
        poll_until([m], lambda: len(m.assignment) == 2, timeout=5, what="the partitions")
        after = describe_raw("127.0.0.1", b.port, "kept", 10)
        assert after is not None and after["group_epoch"] == before["group_epoch"]
        assert [x["member_epoch"] for x in after["members"]] == \
            [x["member_epoch"] for x in before["members"]]
    finally:
        m.close()


def _regex_records(bootstrap: str, group: str) -> list[tuple[str, bytes | None]]:
    """The group's ConsumerGroupRegularExpression records in __consumer_offsets, read
    with a plain consumer."""
    from confluent_kafka import Consumer

    from pybroker.group.consumer import records as crec

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        meta = c.list_topics("__consumer_offsets", timeout=10)
        parts = list(meta.topics["__consumer_offsets"].partitions)
        c.assign([TopicPartition("__consumer_offsets", p, 0) for p in parts])
        at_end: set[int] = set()
        out: list[tuple[str, bytes | None]] = []
        deadline = time.monotonic() + 30
        while len(at_end) < len(parts) and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                at_end.add(msg.partition())
                continue
            key = crec.decode_key(msg.key() or b"")
            if key is not None and key.type == crec.REGULAR_EXPRESSION and key.group == group:
                out.append((key.member or "", msg.value()))
        assert len(at_end) == len(parts), "did not reach the end of __consumer_offsets"
        return out
    finally:
        c.close()


def test_members_survive_a_broker_restart(broker_factory: BrokerFactory,
                                          topic_name: str) -> None:
    """The group is rebuilt from __consumer_offsets: after a restart the members carry on
    with their epochs and partitions (no rejoin, nothing moves)."""
    from pybroker.tools._group_views import describe_raw

    b = broker_factory(FAST_GROUPS)
    create_topic(b.bootstrap, topic_name, 4)
    members = [Member848(b.bootstrap, "survivor", [topic_name]) for _ in range(2)]
    try:
        poll_until(members, lambda: [len(m.assignment) for m in members] == [2, 2],
                   what="an even split")
        before = describe_raw("127.0.0.1", b.port, "survivor", 10)
        assert before is not None and before["group_state"] == "Stable"
        b.restart()
        after = describe_raw("127.0.0.1", b.port, "survivor", 10)
        assert after is not None
        assert {m["member_id"]: m["member_epoch"] for m in after["members"]} == \
            {m["member_id"]: m["member_epoch"] for m in before["members"]}
        assert after["group_epoch"] == before["group_epoch"]
        held = [set(m.assignment) for m in members]
        records = [{"value": b"r%d" % i, "partition": i % 4} for i in range(20)]
        assert_delivered(produce_all(producer(b.bootstrap), topic_name, records))
        poll_until(members, lambda: len({v for m in members for *_, v in m.messages}) >= 20,
                   what="records after the restart")
        assert [set(m.assignment) for m in members] == held
        final = describe_raw("127.0.0.1", b.port, "survivor", 10)
        assert final is not None and final["group_epoch"] == before["group_epoch"]
    finally:
        for m in members:
            m.close()
