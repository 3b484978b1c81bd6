"""`pybroker local-cluster` locks its --base-dir (Kafka's `.lock`): a second one on the
same dir is refused in one line before it writes anything (no zoo.cfg rewritten, no
ZooKeeper started on the live one's data)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pybroker.log.dir_lock import DirLock


def test_second_local_cluster_on_a_held_base_dir_is_refused(tmp_path: Path) -> None:
    held = DirLock.acquire(tmp_path)  # as the live local-cluster holds it
    try:
        # a java that would fail at once: the refusal must come before anything starts
        env = {**os.environ, "JAVA": "/bin/false", "PYBROKER_ZOOKEEPER_CLASSPATH": sys.executable}
        result = subprocess.run(
            [sys.executable, "-m", "pybroker", "local-cluster", "--brokers", "1",
             "--base-dir", str(tmp_path)], capture_output=True, text=True, timeout=60, env=env)
    finally:
        held.release()
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"Failed to acquire lock on file .lock in {tmp_path}. A Kafka instance in another "
        "process or thread is using this directory. (a local cluster runs there: pybroker "
        f"local-cluster --base-dir {tmp_path} status)"]
    assert [p.name for p in tmp_path.iterdir()] == [".lock"]
