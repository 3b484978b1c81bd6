"""A batch of partition states over many topics (a controlled shutdown's, a restart's)
is taken on by the metadata listener without holding the event loop for the whole
batch (issue 25): the topics' records are built in slices, other tasks running
between them."""

from __future__ import annotations

import time
import uuid
from typing import Any

from pybroker.coordination.base import TopicAssignment, TopicRecord, VersionedState
from pybroker.coordination.znodes import LeaderAndIsr
from pybroker.metadata.listener import MetadataListener
from tests.loop_turns import Turns

TOPICS = 200
#: what building one topic's record costs in this test (a loaded machine's)
RECORD_S = 0.001


class _Publisher:
    def __init__(self) -> None:
        self.records: list[TopicRecord] = []
        self.only: dict[str, Any] = {}

    async def topics_changed(self, changes: list[tuple[TopicRecord, list[int]]],
                             only: Any = None) -> None:
        self.records += [record for record, _ in changes]
        self.only.update(only or {})


def test_a_batch_over_many_topics_gives_other_tasks_turns() -> None:
    publisher = _Publisher()
    listener = MetadataListener(None, publisher, "PLAINTEXT")  # type: ignore[arg-type]
    names = [f"t{i}" for i in range(TOPICS)]
    for name in names:
        listener.assignments[name] = TopicAssignment(name=name, topic_id=uuid.uuid4(),
                                                     partitions={0: [1, 2, 3]})
    turns = Turns()
    build = listener._record

    def slow_record(name: str) -> Any:
        time.sleep(RECORD_S)  # holds the loop, as building a big topic's record does
        turns.note()
        return build(name)

    listener._record = slow_record  # type: ignore[method-assign]
    state = VersionedState(LeaderAndIsr(controller_epoch=1, leader=1, leader_epoch=1,
                                        isr=[1, 2, 3]), 0)
    batch: dict[str, dict[int, VersionedState | None]] = {n: {0: state} for n in names}
    del listener.assignments["t7"]  # a batch may name a topic deleted meanwhile

    turns.run(lambda: listener._states_changed(batch))
    assert [r.name for r in publisher.records] == [n for n in names if n != "t7"]
    assert all(r.partitions[0].leader == 1 for r in publisher.records)
    # the replica layer is told which partitions changed: it applies those alone
    assert all(list(publisher.only[r.name]) == [0] for r in publisher.records)
    seen = turns.seen
    assert seen[-1] > seen[0], (seen[0], seen[-1])  # turns given during the batch
