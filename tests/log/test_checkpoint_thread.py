"""The periodic offset checkpoints are written (and fsynced) in a worker thread, not
on the event loop that serves requests (issue 18: 4-24 ms stalls)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pybroker.log import manager
from pybroker.log.dir_failure import LogDirFailures
from tests.fuzz.inprocess import InProcessBroker


def test_checkpoint_loop_writes_in_a_worker_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writers: list[threading.Thread] = []
    real = manager.write_checkpoint

    def recording(path: Path, offsets: dict[tuple[str, int], int]) -> None:
        writers.append(threading.current_thread())
        real(path, offsets)

    monkeypatch.setattr(manager, "write_checkpoint", recording)
    broker = InProcessBroker(tmp_path / "data",
                             {"log.flush.offset.checkpoint.interval.ms": "50"})
    try:
        loop_thread = broker.portal.call(threading.current_thread)
        deadline = time.monotonic() + 30
        while len(writers) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(writers) >= 3, "no periodic checkpoint within 30 s"
        assert all(t is not loop_thread for t in writers)
    finally:
        broker.close()


def test_checkpoint_files_are_what_write_checkpoints_writes(tmp_path: Path) -> None:
    files = [(tmp_path / "a", {("t", 0): 5, ("t", 1): 7}), (tmp_path / "b", {})]
    manager.write_checkpoint_files(files, LogDirFailures([tmp_path]))
    assert (tmp_path / "a").read_text() == "0\n2\nt 0 5\nt 1 7\n"
    assert (tmp_path / "b").read_text() == "0\n0\n"
