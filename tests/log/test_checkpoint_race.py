"""Two writers of the offset checkpoints at once: the periodic one, on a worker thread,
and DeleteRecords', on the event loop. Both write `<file>.tmp` and rename it over the
file, so unserialized the second rename found its `.tmp` already renamed away: ENOENT,
which took the log dir offline and, with one dir, stopped the broker (a DeleteRecords
in tests/cluster/test_cluster_tools.py met the periodic write this way). And the older
snapshot, renamed last, must not replace the newer one."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import anyio
import pytest

from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.log import checkpoint
from pybroker.log.checkpoint import read_checkpoint
from pybroker.log.dir_failure import LogDirFailures
from pybroker.log.manager import LOG_START_FILE

from .test_manager_high_watermark import make_batch, start


def test_a_checkpoint_write_on_the_loop_meets_the_periodic_one_in_its_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = TopicRecord("t", uuid.uuid4(), [PartitionState(leader=0, leader_epoch=0,
                                                            replicas=[0], isr=[0])], {})
    m = start(tmp_path, record)
    halted: list[bool] = []
    m.failures = LogDirFailures(m.dirs, on_all_failed=lambda: halted.append(True))
    p = m.get("t", 0)
    assert p is not None
    p.append(memoryview(make_batch(10)), 0)
    p.update_high_watermark(10)

    thread_wrote_tmp = threading.Event()
    loop_write_done = threading.Event()
    real_replace = os.replace

    def replace(src: str | Path, dst: str | Path) -> None:
        if (threading.current_thread() is not threading.main_thread()
                and Path(dst).name == LOG_START_FILE and not thread_wrote_tmp.is_set()):
            # the periodic writer has its .tmp written: let the loop's write run now
            # (bounded: serialized writers make the loop wait for this one instead)
            thread_wrote_tmp.set()
            loop_write_done.wait(2)
        real_replace(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", replace)

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(m.write_checkpoints_in_thread)  # snapshot: log start 0
            with anyio.fail_after(10):
                while not thread_wrote_tmp.is_set():
                    await anyio.sleep(0.01)
            p.log.advance_log_start_offset(4)  # DeleteRecords, then its own write
            m.write_checkpoints()
            loop_write_done.set()

    anyio.run(scenario)
    assert not m.failures.offline and not halted, "a checkpoint race took the log dir offline"
    assert read_checkpoint(tmp_path / LOG_START_FILE) == {("t", 0): 4}, (
        "the older snapshot replaced the newer one")
    m.shutdown()
