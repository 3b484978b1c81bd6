"""A second broker on a live broker's data dir is refused (Kafka's `.lock`), in
separate processes: one line, a non-zero exit, the dir untouched; the live broker
then dies by kill -9 and gets back every acknowledged record, its torn tail cut."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.conftest import free_port

from . import rawclient
from .helpers import create_topic, produce_all, producer, watermarks
from .test_durability import FIRST_SEGMENT, produce_until_killed, read_all

if TYPE_CHECKING:
    from conftest import BrokerFactory

#: the refused start exits at once; a start that was not refused is stopped after this
SECOND_START_S = 30.0


def dir_state(directory: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `directory`: (size, mtime_ns, sha256) by relative path."""
    state = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            st = path.stat()
            state[str(path.relative_to(directory))] = (
                st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return state


def start_second_broker(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """`pybroker serve` on `data_dir` with only the port changed; stopped (SIGTERM, as an
    operator would) if it was not refused by SECOND_START_S."""
    command = [sys.executable, "-m", "pybroker", "serve",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
               "--override", f"log.dirs={data_dir}"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        out, err = proc.communicate(timeout=SECOND_START_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=SECOND_START_S)
        err = f"(still running after {SECOND_START_S:.0f}s: not refused)\n{err}"
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def test_second_broker_refused_then_live_broker_recovers_after_kill9(
        broker_factory: BrokerFactory, topic_name: str) -> None:
    # no periodic checkpoint writes while the dir is compared
    live = broker_factory(log_flush_offset_checkpoint_interval_ms=3600000)
    create_topic(live.bootstrap, topic_name)
    first = produce_all(producer(live.bootstrap, acks="all"), topic_name,
                        [{"key": f"a{i}".encode(), "value": f"before-{i}".encode(),
                          "partition": 0} for i in range(200)])
    assert all(m.error() is None for m in first)

    before = dir_state(live.data_dir)
    # the embedded metadata store's file is in the dir, under the same lock
    assert "pybroker-metadata.json" in before and "meta.properties" in before
    second = start_second_broker(live.data_dir)
    assert second.returncode != 0, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert "Failed to acquire lock on file .lock in" in lines[0], lines[0]
    assert str(live.data_dir) in lines[0]
    assert dir_state(live.data_dir) == before, "the refused broker changed the live dir"

    # the live broker goes on, then dies mid-stream
    acked = list(first) + produce_until_killed(live, topic_name, kill_after=300)
    assert not (live.data_dir / ".kafka_cleanshutdown").exists(), (
        "a clean-shutdown marker in the dir of a broker that was killed")
    # a torn write at the tail: only recovery (not skipped as after a clean shutdown)
    # cuts it
    segment = live.data_dir / f"{topic_name}-0" / FIRST_SEGMENT
    valid_size = segment.stat().st_size
    torn = rawclient.build_batch([rawclient.Rec(b"torn" * 50)])
    with segment.open("ab") as f:
        f.write(torn[: len(torn) // 2])

    live.start()
    assert segment.stat().st_size == valid_size, "torn tail kept: recovery was skipped"
    stored = read_all(live, topic_name)
    by_offset = {offset: (key, value) for offset, key, value in stored}
    assert [offset for offset, _, _ in stored] == list(range(len(stored)))
    lost = [m.offset() for m in acked if by_offset.get(m.offset()) != (m.key(), m.value())]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost: {lost[:10]}"
    assert len(stored) >= len(acked)
    [after] = produce_all(producer(live.bootstrap), topic_name,
                          [{"value": b"after", "partition": 0}])
    assert after.error() is None and after.offset() == len(stored)
    assert watermarks(live.bootstrap, topic_name) == (0, len(stored) + 1)
