"""The embedded store's journal (issue 25): a write appends what changed instead of
rewriting the whole file, off the event loop; a crash mid-write loses only that
unacknowledged write; compaction folds the journal into the snapshot."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import anyio
import pytest

from pybroker.coordination import embedded
from pybroker.coordination.base import TopicAssignment
from pybroker.coordination.embedded import JOURNAL_FILE, METADATA_FILE, EmbeddedBackend
from pybroker.coordination.errors import MalformedZNode
from pybroker.coordination.journal import Journal, frame
from pybroker.coordination.znodes import LeaderAndIsr

WAIT_S = 60.0


def state(leader_epoch: int, isr: list[int] | None = None) -> LeaderAndIsr:
    return LeaderAndIsr(controller_epoch=1, leader=0, leader_epoch=leader_epoch,
                        isr=isr if isr is not None else [0])


async def populated(tmp_path: Path, topics: int, partitions: int) -> EmbeddedBackend:
    backend = EmbeddedBackend(tmp_path, broker_id=0)
    await backend.start()
    lease = await backend.try_elect_controller(0)
    assert lease is not None
    for i in range(topics):
        name = f"t{i}"
        await backend.create_topic(TopicAssignment(
            name=name, topic_id=uuid.uuid4(),
            partitions={p: [0] for p in range(partitions)}), {"retention.ms": "1000"}, lease)
        await backend.create_partition_states(
            name, {p: state(0) for p in range(partitions)}, lease)
    return backend


def snapshot_of(tmp_path: Path) -> bytes:
    return (tmp_path / METADATA_FILE).read_bytes()


def journal_size(tmp_path: Path) -> int:
    path = tmp_path / JOURNAL_FILE
    return path.stat().st_size if path.exists() else 0


def test_a_write_costs_what_it_changes_not_the_store(tmp_path: Path) -> None:
    async def main() -> None:
        backend = await populated(tmp_path, topics=40, partitions=50)  # 2,000 partitions
        lease = await backend.try_elect_controller(0)
        assert lease is not None
        snapshot = snapshot_of(tmp_path)
        store_bytes = len(snapshot) + journal_size(tmp_path)
        assert store_bytes > 100_000
        written = []
        for leader_epoch in range(1, 11):
            before = journal_size(tmp_path)
            await backend.update_partition_state("t7", 3, state(leader_epoch),
                                                 leader_epoch - 1, lease)
            written.append(journal_size(tmp_path) - before)
        # each ISR/leader change appends one small frame; the snapshot is not rewritten
        assert all(0 < n < 400 for n in written), written
        assert snapshot_of(tmp_path) == snapshot
        await backend.close()
        again = EmbeddedBackend(tmp_path, broker_id=0)
        states = await again.partition_states("t7")
        assert states[3].state == state(10)
        assert len(await again.topic_assignments()) == 40

    anyio.run(main)


def test_async_writes_are_done_off_the_event_loop_thread(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    append = Journal.append

    def recording(self: Journal, data: bytes) -> None:
        threads.append(threading.get_ident())
        append(self, data)

    monkeypatch.setattr(Journal, "append", recording)

    async def main() -> None:
        loop_thread = threading.get_ident()
        backend = await populated(tmp_path, topics=2, partitions=3)
        await backend.set_topic_configs("t0", {"retention.ms": "5"})
        await backend.allocate_producer_ids(0, 10)
        assert threads and loop_thread not in threads
        await backend.close()

    anyio.run(main)


async def write_history(backend: EmbeddedBackend) -> list[dict[str, object]]:
    """A few writes of different kinds; the state after each (as `observed` sees it)."""
    lease = await backend.try_elect_controller(0)
    assert lease is not None
    seen = [await observed(backend)]
    await backend.create_topic(TopicAssignment(name="a", topic_id=uuid.uuid4(),
                                               partitions={0: [0], 1: [0]}), {}, lease)
    seen.append(await observed(backend))
    await backend.create_partition_states("a", {0: state(0), 1: state(0)}, lease)
    seen.append(await observed(backend))
    await backend.update_partition_state("a", 1, state(1), 0, lease)
    seen.append(await observed(backend))
    await backend.set_topic_configs("a", {"cleanup.policy": "compact"})
    seen.append(await observed(backend))
    await backend.allocate_producer_ids(0, 1000)
    seen.append(await observed(backend))
    await backend.request_topic_deletion("a")
    seen.append(await observed(backend))
    return seen


async def observed(backend: EmbeddedBackend) -> dict[str, object]:
    assignments = await backend.topic_assignments()
    return {
        "topics": {n: sorted(a.partitions) for n, a in assignments.items()},
        "states": {n: {p: v.state for p, v in (await backend.partition_states(n)).items()}
                   for n in assignments},
        "configs": {n: await backend.topic_configs(n) for n in assignments},
        "deleting": await backend.topics_pending_deletion(),
        "next_pid": backend._producer_id_next,
    }


def test_a_torn_last_frame_is_dropped_on_load_at_every_cut(tmp_path: Path) -> None:
    async def history() -> list[dict[str, object]]:
        backend = EmbeddedBackend(tmp_path, broker_id=0)
        await backend.start()
        seen = await write_history(backend)
        return seen  # not closed: a clean close would fold the journal into the snapshot

    seen = anyio.run(history)
    journal = (tmp_path / JOURNAL_FILE).read_bytes()
    lines = journal.splitlines(keepends=True)
    assert len(lines) == len(seen)  # the election's frame, then one per write
    whole = b"".join(lines[:-1])
    snapshot = snapshot_of(tmp_path)

    async def load() -> dict[str, object]:
        return await observed(EmbeddedBackend(tmp_path, broker_id=0))

    # every cut inside the last frame, and garbage in place of its end, lose that write only
    tails = [lines[-1][:cut] for cut in range(1, len(lines[-1]))]
    tails.append(lines[-1][:-5] + b"\0\0\0\0\n")
    tails.append(lines[-1][:20] + b"\n" + b"\0" * 30)
    for tail in tails:
        (tmp_path / METADATA_FILE).write_bytes(snapshot)
        (tmp_path / JOURNAL_FILE).write_bytes(whole + tail)
        assert anyio.run(load) == seen[-2], tail
        # the torn tail was cut off the file: the next write follows the last whole frame
        assert (tmp_path / JOURNAL_FILE).read_bytes() == whole

    async def write_after_recovery() -> None:
        backend = EmbeddedBackend(tmp_path, broker_id=0)
        await backend.allocate_producer_ids(0, 5)
        assert backend._producer_id_next == 1005

    anyio.run(write_after_recovery)
    assert anyio.run(load)["next_pid"] == 1005


def test_a_bad_frame_before_a_good_one_is_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    async def history() -> None:
        await write_history(EmbeddedBackend(tmp_path, broker_id=0))

    anyio.run(history)
    path = tmp_path / JOURNAL_FILE
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][:12] + b"X" + lines[2][13:]  # a flipped byte in an early frame
    path.write_bytes(b"".join(lines))
    with pytest.raises(MalformedZNode, match="corrupt"):
        EmbeddedBackend(tmp_path, broker_id=0)


def test_compaction_folds_the_journal_into_the_snapshot(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "COMPACT_MIN_BYTES", 2000)

    async def main() -> dict[str, object]:
        backend = await populated(tmp_path, topics=3, partitions=4)
        lease = await backend.try_elect_controller(0)
        assert lease is not None
        sizes = []
        for leader_epoch in range(1, 60):
            await backend.update_partition_state("t1", 2, state(leader_epoch),
                                                 leader_epoch - 1, lease)
            sizes.append(journal_size(tmp_path))
        # the journal grew, was emptied into a new snapshot, and grew again
        assert max(sizes) > 2000 and min(sizes[sizes.index(max(sizes)):]) < 2000
        assert max(sizes) < 2 * max(2000, len(snapshot_of(tmp_path))) + 400
        assert json.loads(snapshot_of(tmp_path))["journal_seq"] > 0
        return await observed(backend)

    before = anyio.run(main)

    async def load() -> dict[str, object]:
        return await observed(EmbeddedBackend(tmp_path, broker_id=0))

    assert anyio.run(load) == before


def test_a_crash_between_compactions_steps_replays_nothing_twice(tmp_path: Path) -> None:
    async def history() -> None:
        await write_history(EmbeddedBackend(tmp_path, broker_id=0))

    anyio.run(history)
    journal = (tmp_path / JOURNAL_FILE).read_bytes()

    async def compact_and_observe() -> dict[str, object]:
        backend = EmbeddedBackend(tmp_path, broker_id=0)
        await backend.close()  # a clean close compacts
        return await observed(EmbeddedBackend(tmp_path, broker_id=0))

    compacted = anyio.run(compact_and_observe)
    assert journal_size(tmp_path) == 0
    # the snapshot was renamed in, but the journal not yet emptied: its frames are
    # already in the snapshot and must not apply again (producer ids, versions)
    (tmp_path / JOURNAL_FILE).write_bytes(journal)

    async def load() -> tuple[dict[str, object], int]:
        backend = EmbeddedBackend(tmp_path, broker_id=0)
        block = await backend.allocate_producer_ids(0, 1)
        return await observed(backend), block.start

    again, next_block = anyio.run(load)
    assert again == compacted | {"next_pid": 1001}
    assert next_block == 1000


_WRITER = textwrap.dedent("""
    import sys, uuid, anyio
    from pybroker.coordination.base import TopicAssignment
    from pybroker.coordination.embedded import EmbeddedBackend
    from pybroker.coordination.znodes import LeaderAndIsr

    async def main():
        backend = EmbeddedBackend(sys.argv[1], broker_id=0)
        lease = await backend.try_elect_controller(0)
        await backend.create_topic(TopicAssignment(name="t", topic_id=uuid.uuid4(),
                                                   partitions={0: [0]}), {}, lease)
        await backend.create_partition_states("t", {0: LeaderAndIsr(
            controller_epoch=1, leader=0, leader_epoch=0, isr=[0])}, lease)
        epoch = 0
        while True:
            epoch += 1
            await backend.update_partition_state("t", 0, LeaderAndIsr(
                controller_epoch=1, leader=0, leader_epoch=epoch, isr=[0]),
                epoch - 1, lease)
            print(epoch, flush=True)  # acknowledged: durable before this line

    anyio.run(main)
""")


def test_kill_9_mid_write_loses_no_acknowledged_write(tmp_path: Path) -> None:
    for round_ in range(3):
        data = tmp_path / f"round{round_}"
        data.mkdir()
        child = subprocess.Popen([sys.executable, "-c", _WRITER, str(data)],
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        acknowledged = 0
        for line in child.stdout:
            acknowledged = int(line)
            if acknowledged >= 30 + 17 * round_:  # killed at a different moment each round
                break
        os.kill(child.pid, signal.SIGKILL)
        child.wait(WAIT_S)
        # what it acknowledged before the kill landed is still in the pipe
        acknowledged = max([acknowledged, *(int(line) for line in child.stdout)])
        child.stdout.close()

        async def load(data: Path = data) -> int:
            backend = EmbeddedBackend(data, broker_id=0)
            return (await backend.partition_states("t"))[0].state.leader_epoch

        # every acknowledged write is there, and at most the one in flight besides
        recovered = anyio.run(load)
        assert acknowledged <= recovered <= acknowledged + 1


def test_frames_reject_a_newline() -> None:
    with pytest.raises(ValueError):
        frame(b"a\nb")
