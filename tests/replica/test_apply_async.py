"""Taking on a new topic without holding the event loop (issue 25): a partition this
broker is to lead gets its leader epoch recorded (the leader-epoch-checkpoint written
and fsynced) on the worker thread that opens its log, not on the loop by make_leader."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.log.manager import LogManager
from pybroker.metadata.cache import MetadataCache
from pybroker.purgatory import Purgatory
from pybroker.replica.fetcher import ReplicaFetcherManager
from pybroker.replica.manager import ReplicaManager
from pybroker.replica.partition import ReplicaPartition


@pytest.mark.parametrize("leaders_later", [False, True])
def test_a_new_leaders_epoch_is_recorded_off_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leaders_later: bool) -> None:
    """leaders_later: the topic arrives first without partition states (no leaders, as
    the controller writes them after the topic), then with them."""
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    logs = LogManager(config, "cluster")
    logs.startup()
    replicas = ReplicaManager(0, logs, Purgatory(),
                              ReplicaFetcherManager(0, MetadataCache("cluster"), config))
    # partitions 0-3 led here at epoch 5, 4-5 followed (another broker leads)
    record = TopicRecord("t", uuid.uuid4(), [
        PartitionState(leader=0 if i < 4 else 1, leader_epoch=5, replicas=[0, 1], isr=[0, 1])
        for i in range(6)], {})
    epoch_when_led: dict[int, int | None] = {}
    opened_on: set[int] = set()
    open_files, open_batch = LogManager._open_files, LogManager._open_batch
    make_leader = ReplicaPartition.make_leader

    def recording_open(self: LogManager, *args: object):  # type: ignore[no-untyped-def]
        opened_on.add(threading.get_ident())
        return open_files(self, *args)  # type: ignore[arg-type]

    def recording_batch(self: LogManager, *args: object):  # type: ignore[no-untyped-def]
        opened_on.add(threading.get_ident())
        return open_batch(self, *args)  # type: ignore[arg-type]

    def recording_leader(self: ReplicaPartition, state: PartitionState,
                         version: int = -1) -> bool:
        epoch_when_led[self.index] = self.log.log.latest_epoch
        return make_leader(self, state, version)

    monkeypatch.setattr(LogManager, "_open_files", recording_open)
    monkeypatch.setattr(LogManager, "_open_batch", recording_batch)
    monkeypatch.setattr(ReplicaPartition, "make_leader", recording_leader)

    async def main() -> int:
        if leaders_later:
            await replicas.apply_topic_async(TopicRecord("t", record.topic_id, [
                PartitionState(leader=-1, leader_epoch=-1, replicas=[0, 1], isr=[])
                for _ in range(6)], {}))
            assert all(replicas.get("t", i) is not None for i in range(6))
        await replicas.apply_topic_async(record)
        return threading.get_ident()

    loop_thread = anyio.run(main)
    assert opened_on and loop_thread not in opened_on
    # the epoch was in the log's cache (and its file) before make_leader ran on the loop
    assert epoch_when_led == dict.fromkeys(range(4), 5)
    for index in range(6):
        partition = replicas.get("t", index)
        assert partition is not None
        assert partition.is_leader == (index < 4)
        checkpoint = (tmp_path / f"t-{index}" / "leader-epoch-checkpoint")
        if index < 4:
            assert checkpoint.read_text().splitlines() == ["0", "1", "5 0"]
        else:  # a follower records the epochs of what it fetches, not the leader's epoch
            assert partition.log.log.latest_epoch is None
    logs.shutdown()


def test_a_followers_takeover_records_the_epoch_off_the_loop_once_it_no_longer_fetches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader change of partitions this broker followed (a failover, a controlled
    shutdown): the new epoch is recorded at the log end on a worker thread, after the
    partition left its fetcher and before make_leader, which then has nothing to write
    (issue 25: the fsyncs of hundreds of takeovers held the loop for hundreds of ms)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from pybroker.replica import manager as manager_module
    from pybroker.replica.manager import _LeadAt

    config = BrokerConfig({"log.dirs": str(tmp_path)})
    logs = LogManager(config, "cluster")
    logs.startup()
    fetchers = ReplicaFetcherManager(0, MetadataCache("cluster"), config)
    replicas = ReplicaManager(0, logs, Purgatory(), fetchers)
    topic_id = uuid.uuid4()

    def states(takeover_epoch: int) -> TopicRecord:
        # broker 1 leads all six at epoch 5; then broker 0 takes 0-3 over
        return TopicRecord("t", topic_id, [
            PartitionState(leader=0 if i < 4 and takeover_epoch > 5 else 1,
                           leader_epoch=takeover_epoch if i < 4 else 5,
                           replicas=[0, 1], isr=[0, 1]) for i in range(6)], {})

    def fetched(key: tuple[str, int]) -> bool:
        return any(key in f.states for f in fetchers.fetchers.values())

    recorded: dict[int, tuple[int, bool]] = {}  # index -> (thread, still fetched then)
    epoch_when_led: dict[int, int | None] = {}
    record_epochs = manager_module._record_epochs
    make_leader = ReplicaPartition.make_leader

    def recording(steps: list[_LeadAt]) -> None:
        for step in steps:
            recorded[step.partition.index] = (threading.get_ident(),
                                              fetched(("t", step.partition.index)))
        record_epochs(steps)

    def recording_leader(self: ReplicaPartition, state: PartitionState,
                         version: int = -1) -> bool:
        epoch_when_led[self.index] = self.log.log.latest_epoch
        return make_leader(self, state, version)

    monkeypatch.setattr(manager_module, "_record_epochs", recording)
    monkeypatch.setattr(ReplicaPartition, "make_leader", recording_leader)

    async def main() -> int:
        await replicas.apply_topic_async(states(5))
        for index in range(6):
            partition = replicas.get("t", index)
            assert partition is not None and partition.leader == 1
            assert fetched(("t", index))
            # what the follower fetched from broker 1 at epoch 5: index + 1 records
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                                producer_id=-1, producer_epoch=-1,
                                                base_sequence=-1, batch_size=1 << 20)
            for n in range(index + 1):
                builder.append(n, timestamp=0, key=None, value=b"v", headers=[])
            partition.log.append(memoryview(bytes(builder.build())), 5)
        await replicas.apply_topic_async(states(6))
        return threading.get_ident()

    loop_thread = anyio.run(main)
    assert sorted(recorded) == [0, 1, 2, 3]
    assert all(thread != loop_thread and not still_fetched
               for thread, still_fetched in recorded.values()), recorded
    assert epoch_when_led == dict.fromkeys(range(4), 6)
    for index in range(6):
        partition = replicas.get("t", index)
        assert partition is not None
        assert partition.is_leader == (index < 4)
        assert fetched(("t", index)) == (index >= 4)
        lines = (tmp_path / f"t-{index}" / "leader-epoch-checkpoint").read_text().splitlines()
        if index < 4:  # epoch 6 starts at the log end the follower had reached
            assert lines == ["0", "2", "5 0", f"6 {index + 1}"]
        else:
            assert lines == ["0", "1", "5 0"]
    logs.shutdown()


def _manager(tmp_path: Path) -> tuple[LogManager, ReplicaFetcherManager, ReplicaManager]:
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    logs = LogManager(config, "cluster")
    logs.startup()
    fetchers = ReplicaFetcherManager(0, MetadataCache("cluster"), config)
    return logs, fetchers, ReplicaManager(0, logs, Purgatory(), fetchers)


def _fetched(fetchers: ReplicaFetcherManager, key: tuple[str, int]) -> bool:
    return any(key in f.states for f in fetchers.fetchers.values())


def test_takeovers_over_many_topics_record_their_epochs_side_by_side_in_one_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A controlled shutdown moves leaderships of every topic at once: the broker
    taking them over records every new epoch in one worker-thread call, the checkpoint
    writes (each a write, an fsync, a rename and a dir fsync) running side by side
    rather than one after another, topic after topic (issue 25)."""
    from pybroker.replica import manager as manager_module
    from pybroker.replica.manager import _LeadAt

    logs, fetchers, replicas = _manager(tmp_path)
    ids = {name: uuid.uuid4() for name in ("a", "b", "c")}

    def states(name: str, takeover: bool) -> tuple[TopicRecord, None]:
        # broker 1 leads; then broker 0 takes over 0-2 of each topic at epoch 1
        return TopicRecord(name, ids[name], [
            PartitionState(leader=0 if takeover and i < 3 else 1,
                           leader_epoch=1 if takeover and i < 3 else 0,
                           replicas=[0, 1], isr=[0, 1]) for i in range(4)], {}), None

    calls: list[int] = []
    writers: list[int] = []
    record_epochs = manager_module._record_epochs
    assign = manager_module.assign_leader_epochs

    def counting_record(steps: list[_LeadAt]) -> None:
        calls.append(len(steps))
        record_epochs(steps)

    def counting_assign(logs: list[object], epochs: list[int], threads: int
                        ) -> list[BaseException | None]:
        writers.append(threads)
        return assign(logs, epochs, threads)

    monkeypatch.setattr(manager_module, "_record_epochs", counting_record)
    monkeypatch.setattr(manager_module, "assign_leader_epochs", counting_assign)

    async def main() -> None:
        await replicas.apply_topics_async([states(n, False) for n in ids])
        assert calls == []  # nothing taken over: nothing recorded
        await replicas.apply_topics_async([states(n, True) for n in ids])

    anyio.run(main)
    assert calls == [9], calls  # the three topics' nine takeovers, in one call
    # ... one Rust call, its checkpoints written side by side without the GIL
    assert writers == [manager_module.EPOCH_WRITERS] and writers[0] >= 2, writers
    for name in ids:
        for index in range(4):
            partition = replicas.get(name, index)
            assert partition is not None and partition.is_leader == (index < 3)
            assert _fetched(fetchers, (name, index)) == (index >= 3)
            if index < 3:
                lines = (tmp_path / f"{name}-{index}" / "leader-epoch-checkpoint").read_text()
                assert lines.splitlines() == ["0", "1", "1 0"]
            else:  # followed: nothing fetched, no epoch
                assert partition.log.log.latest_epoch is None
    logs.shutdown()


def test_a_broker_in_controlled_shutdown_stops_fetching_what_it_left_the_isr_of(
        tmp_path: Path) -> None:
    """Kafka's controller sends StopReplica to a broker in controlled shutdown for the
    partitions it took it out of the ISR of: it stops fetching them. Otherwise their
    leaders, seeing it caught up, take it back into the ISR (issue 25: a 10,000-partition
    controlled shutdown saw 3,400 such ISR expansions), and acks=all waits for a broker
    about to stop. Partitions still with it in the ISR are fetched as before."""
    logs, fetchers, replicas = _manager(tmp_path)
    topic_id = uuid.uuid4()

    def states(isr_of: dict[int, list[int]]) -> TopicRecord:
        return TopicRecord("t", topic_id, [
            PartitionState(leader=1, leader_epoch=0, replicas=[1, 0, 2],
                           isr=isr_of.get(i, [1, 0, 2])) for i in range(3)], {})

    async def main() -> None:
        await replicas.apply_topic_async(states({}))
        assert all(_fetched(fetchers, ("t", i)) for i in range(3))
        # an ISR change before the shutdown began: a lagging follower keeps fetching
        await replicas.apply_topic_async(states({0: [1, 2]}))
        assert _fetched(fetchers, ("t", 0))
        replicas.shutting_down = True
        await replicas.apply_topic_async(states({0: [1, 2], 1: [1, 2]}))

    anyio.run(main)
    assert not _fetched(fetchers, ("t", 0))
    assert not _fetched(fetchers, ("t", 1))
    assert _fetched(fetchers, ("t", 2))
    for index in range(3):
        partition = replicas.get("t", index)
        assert partition is not None and partition.leader == 1 and not partition.is_leader
    logs.shutdown()


def test_a_topic_that_fails_to_apply_does_not_hold_back_the_others_of_its_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When each topic's states were their own watch callback, one failing left the
    others applied; applied together in one pass, the others still are (and the failure
    is raised after them, for the watch to log)."""
    logs, fetchers, replicas = _manager(tmp_path)
    records = [TopicRecord(name, uuid.uuid4(), [
        PartitionState(leader=0, leader_epoch=0, replicas=[0], isr=[0]) for _ in range(2)], {})
        for name in ("a", "b", "c")]
    apply_one = ReplicaManager._apply_one

    async def failing(self: ReplicaManager, record: TopicRecord,
                      versions: list[int] | None, *rest: Any) -> None:
        if record.name == "b":
            raise OSError("b's dir is gone")
        await apply_one(self, record, versions, *rest)

    monkeypatch.setattr(ReplicaManager, "_apply_one", failing)
    applied: list[str] = []

    async def main() -> None:
        with pytest.raises(OSError, match="b's dir"):
            await replicas.apply_topics_async([(r, None) for r in records],
                                              lambda r: applied.append(r.name))

    anyio.run(main)
    assert applied == ["a", "c"]
    assert all(replicas.get(name, i) is not None and replicas.get(name, i).is_leader
               for name in ("a", "c") for i in range(2))
    assert replicas.get("b", 0) is None
    logs.shutdown()


def test_a_batch_applies_only_the_partitions_whose_states_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A controlled shutdown changes a third of a topic's states at a time (its
    leaderships, then its ISRs): given the changed partitions, the replica layer applies
    those and leaves the others as they are, instead of taking every partition's
    unchanged state again. A topic whose apply failed is applied whole the next time."""
    logs, fetchers, replicas = _manager(tmp_path)
    topic_id = uuid.uuid4()
    size = 30

    def states(leader_of: dict[int, int]) -> TopicRecord:
        return TopicRecord("t", topic_id, [
            PartitionState(leader=leader_of.get(i, 1), leader_epoch=1 if i in leader_of else 0,
                           replicas=[1, 0, 2], isr=[1, 0, 2]) for i in range(size)], {})

    taken: list[int] = []
    take = ReplicaPartition._take

    def counted(self: ReplicaPartition, state: PartitionState, version: int) -> None:
        taken.append(self.index)
        take(self, state, version)

    monkeypatch.setattr(ReplicaPartition, "_take", counted)
    apply_one = ReplicaManager._apply_one
    fail = [True]

    async def failing_once(self: ReplicaManager, record: TopicRecord,
                           versions: list[int] | None, *rest: Any) -> None:
        if fail[0]:
            fail[0] = False
            raise OSError("a dir went away")
        await apply_one(self, record, versions, *rest)

    async def main() -> None:
        await replicas.apply_topics_async([(states({}), None)])
        assert sorted(taken) == list(range(size))
        taken.clear()
        # this broker takes over 0 and 3; the record has every partition
        await replicas.apply_topics_async([(states({0: 0, 3: 0}), None)], only={"t": [0, 3]})
        assert sorted(taken) == [0, 3]
        assert [i for i in range(size) if replicas.get("t", i).is_leader] == [0, 3]
        assert not _fetched(fetchers, ("t", 0)) and _fetched(fetchers, ("t", 1))
        taken.clear()
        monkeypatch.setattr(ReplicaManager, "_apply_one", failing_once)
        with pytest.raises(OSError):
            await replicas.apply_topics_async([(states({0: 0, 3: 0, 5: 0}), None)],
                                              only={"t": [5]})
        await replicas.apply_topics_async([(states({0: 0, 3: 0, 5: 0}), None)],
                                          only={"t": [5]})
        assert sorted(taken) == list(range(size))  # the failed topic, whole again
        taken.clear()
        await replicas.apply_topics_async([(states({0: 0, 3: 0, 5: 0}), None)],
                                          only={"t": [7]})
        assert taken == [7]  # applied whole once: subsets again

    anyio.run(main)
    assert [i for i in range(size) if replicas.get("t", i).is_leader] == [0, 3, 5]


def test_the_next_topics_logs_open_while_one_topic_is_applied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart applies its topics in one batch: once a topic's logs are open, the next
    topic's are opened on the worker threads while the loop applies the first (before,
    they opened only after it), registered with the log manager, not yet hosted."""
    logs, fetchers, replicas = _manager(tmp_path)
    records = [TopicRecord(name, uuid.uuid4(), [
        PartitionState(leader=0, leader_epoch=3, replicas=[0], isr=[0]) for _ in range(2)], {})
        for name in ("a", "b")]
    apply_one = ReplicaManager._apply_one
    seen: dict[str, bool] = {}

    async def watching(self: ReplicaManager, record: TopicRecord,
                       versions: list[int] | None, *rest: Any) -> None:
        await apply_one(self, record, versions, *rest)
        if record.name == "a":  # still applying a: b's opens may go on meanwhile
            with anyio.move_on_after(10):
                while logs.get("b", 1) is None:
                    await anyio.sleep(0.01)
            seen["b open while a applied"] = logs.get("b", 1) is not None
            seen["b hosted while a applied"] = replicas.get("b", 1) is not None

    monkeypatch.setattr(ReplicaManager, "_apply_one", watching)
    anyio.run(replicas.apply_topics_async, [(r, None) for r in records])
    assert seen == {"b open while a applied": True, "b hosted while a applied": False}
    for name in ("a", "b"):
        for i in range(2):
            partition = replicas.get(name, i)
            assert partition is not None and partition.is_leader
            assert partition.log.log.latest_epoch == 3  # recorded once, by the open
    logs.shutdown()
