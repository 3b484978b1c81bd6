"""Server-side assignors of KIP-848 consumer groups (`group.consumer.assignors`).

Both take every member's subscribed topics (by id), the partition count of each
topic, and the current target assignment, and return the new target:

* ``uniform`` (Kafka's default): spreads all partitions so member counts differ by
  at most one where subscriptions allow, keeping each partition on its current
  owner when that does not unbalance the group (sticky: a member joining or
  leaving moves only the partitions it must);
* ``range``: per topic, the subscribed members in member-id order get consecutive
  ranges, the first ``count % members`` one partition more (co-partitioned topics
  land on the same member).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from pybroker.group.consumer.records import Assignment

TopicPartition = tuple[uuid.UUID, int]
Subscriptions = Mapping[str, frozenset[uuid.UUID]]
Assignor = Callable[[Subscriptions, Mapping[uuid.UUID, int], Mapping[str, Assignment]],
                    dict[str, Assignment]]


def _pack(owned: dict[str, set[TopicPartition]]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for member, tps in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in tps:
            by_topic.setdefault(topic_id, set()).add(partition)
        out[member] = {t: frozenset(p) for t, p in by_topic.items()}
    return out


def uniform(subscriptions: Subscriptions, topics: Mapping[uuid.UUID, int],
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    members = sorted(subscriptions)
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members:
        return {}
    eligible: dict[TopicPartition, list[str]] = {}
    for topic_id, count in topics.items():
        subscribers = [m for m in members if topic_id in subscriptions[m]]
        if subscribers:
            for partition in range(count):
                eligible[(topic_id, partition)] = subscribers
    subscribed = [m for m in members if any(t in topics for t in subscriptions[m])]
    cap = -(-len(eligible) // max(len(subscribed), 1))
    # 1. stickiness: each member keeps what it had, up to an even share
    for member in members:
        for topic_id, partitions in sorted(previous.get(member, {}).items(),
                                           key=lambda kv: kv[0].bytes):
            for partition in sorted(partitions):
                tp = (topic_id, partition)
                if member in eligible.get(tp, ()) and len(owned[member]) < cap \
                        and not any(tp in o for o in owned.values()):
                    owned[member].add(tp)
    taken = {tp for o in owned.values() for tp in o}
    # 2. the rest, hardest to place first, each to the least loaded eligible member
    free = sorted((tp for tp in eligible if tp not in taken),
                  key=lambda tp: (len(eligible[tp]), tp[0].bytes, tp[1]))
    for tp in free:
        target = min(eligible[tp], key=lambda m: (len(owned[m]), m))
        owned[target].add(tp)
    # 3. even out what stickiness left uneven (heterogeneous subscriptions)
    moved = True
    while moved:
        moved = False
        for donor in sorted(members, key=lambda m: -len(owned[m])):
            for tp in sorted(owned[donor], key=lambda tp: (tp[0].bytes, tp[1])):
                target = min(eligible[tp], key=lambda m: (len(owned[m]), m))
                if len(owned[target]) + 1 < len(owned[donor]):
                    owned[donor].discard(tp)
                    owned[target].add(tp)
                    moved = True
                    break
            if moved:
                break
    return _pack(owned)


def range_(subscriptions: Subscriptions, topics: Mapping[uuid.UUID, int],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    owned: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic_id, count in sorted(topics.items(), key=lambda kv: kv[0].bytes):
        subscribers = sorted(m for m in subscriptions if topic_id in subscriptions[m])
        if not subscribers:
            continue
        base, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = base + (1 if i < extra else 0)
            owned[member].update((topic_id, p) for p in range(start, start + size))
            start += size
    return _pack(owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
