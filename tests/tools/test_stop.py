"""`pybroker stop` (kafka-server-stop.sh): the broker of a data dir, or of a
server.properties, found by the dir's `.lock`, stops cleanly; nothing running there is
one line and exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import BrokerFactory

RUN_TIMEOUT_S = 150


def stop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", "stop", *args],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


def test_stop_by_data_dir(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    assert broker.proc is not None
    result = stop("--data-dir", str(broker.data_dir))
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"Stopped the broker of {broker.data_dir} "
                             f"(pid {broker.proc.pid})\n")
    assert broker.proc.poll() == 0  # exited, cleanly
    assert "shut down cleanly" in broker.log_path.read_text()


def test_stop_by_properties_file(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    broker = broker_factory()
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={broker.data_dir}\n")
    result = stop(str(props))
    assert result.returncode == 0, result.stderr
    assert broker.proc is not None and broker.proc.poll() == 0


def test_stop_with_no_broker_there(tmp_path: Path) -> None:
    result = stop("--data-dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr == (f"pybroker stop: no broker runs on {tmp_path} (nothing holds "
                             "its .lock)\n")
